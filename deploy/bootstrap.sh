#!/bin/sh
# One-shot set-up of a local dagnet subnet, run by docker-compose's `bootstrap` service
# (and runnable by hand against any development chain): the subnet itself (created and
# started by //Ferdie, who then owns it and whose hotkey is its uid 0; a re-run finds it),
# registrations for every role (a role already registered is left as it is) and the
# validator's stake. Every role signs with a development key; a local
# subtensor pre-funds these accounts and the embedded chain endows every coldkey.
#
#   DAGNET_NETWORK  the chain: compose passes its profile, `local` (a subtensor on 127.0.0.1:9944)
#                   or `embedded` ($DAGNET_HOME/chain.sqlite); any --network value works by hand
#   DAGNET_NETUID   the netuid the services run on (default 1); bootstrap stops if the
#                   subnet it finds or creates has another one
set -eu
NETWORK=${DAGNET_NETWORK:?set DAGNET_NETWORK}
NETUID=${DAGNET_NETUID:-1}
# The subnet's owner: a key of its own, not a neuron's (the burn goes to its uid 0).
OWNER=//Ferdie
# role=dev key; the same table is in docker-compose.yml's commands
ROLES="validator=//Alice miner-good=//Bob miner-naive=//Charlie miner-invalid=//Dave miner-learner=//Eve"

# Under compose the chain already answers (`net` is healthy); by hand it may still be starting:
# wait for it, at most two minutes.
tries=0
until dagnet subnet list --network "$NETWORK" >/dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -le 120 ] || { echo "bootstrap: no chain at $NETWORK after 120 s" >&2; exit 1; }
  sleep 1
done

# The subnet: the owner's if it owns one already, else a new one; started once the chain allows.
created=$(dagnet subnet create --network "$NETWORK" --dev-key "$OWNER")
netuid=$(printf '%s' "$created" | python -c 'import json, sys; print(json.load(sys.stdin)["netuid"])')
if [ "$netuid" != "$NETUID" ]; then
  echo "bootstrap: $OWNER's subnet on $NETWORK is netuid $netuid, the services run on $NETUID: set DAGNET_NETUID=$netuid" >&2
  exit 1
fi

# `subnet register` pays for a hotkey not on the subnet yet and only reports one that is (a re-run).
for entry in $ROLES; do
  role=${entry%%=*}; key=${entry#*=}
  uid=$(dagnet subnet register --network "$NETWORK" --netuid "$NETUID" --dev-key "$key" \
        | python -c 'import json, sys; r = json.load(sys.stdin); print(r["uid"], "(new)" if r["new"] else "(already)")')
  echo "bootstrap: $role is uid $uid"
done
dagnet subnet stake 1000 --network "$NETWORK" --netuid "$NETUID" --dev-key //Alice >/dev/null

echo "bootstrap: subnet $NETUID ready on $NETWORK"
