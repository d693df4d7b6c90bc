#!/bin/sh
# One-shot set-up of a local dagnet subnet, run by docker-compose's `bootstrap` service
# (and runnable by hand against any development chain): registrations on subnet 1 for
# every role and the validator's stake. Every role signs with a development key; a
# local subtensor pre-funds these accounts and the embedded chain endows every coldkey.
#
#   DAGNET_NETWORK  embedded:/data/chain.sqlite | ws://subtensor:9944 | local
#   DATA            where the provider list for the validator goes (default /data)
set -eu
NETWORK=${DAGNET_NETWORK:?set DAGNET_NETWORK}
DATA=${DATA:-/data}
NETUID=${DAGNET_NETUID:-1}
# role=dev key; the same table is in docker-compose.yml's commands
ROLES="validator=//Alice miner-good=//Bob miner-naive=//Charlie miner-invalid=//Dave provider=//Eve"

# The chain may still be starting: wait for it, at most two minutes.
tries=0
until dagnet chain status --network "$NETWORK" --netuid "$NETUID" --json >/dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -le 120 ] || { echo "bootstrap: no chain at $NETWORK after 120 s" >&2; exit 1; }
  sleep 1
done

for entry in $ROLES; do
  role=${entry%%=*}; key=${entry#*=}
  dagnet subnet register --network "$NETWORK" --netuid "$NETUID" --dev-key "$key" >/dev/null \
    || echo "bootstrap: $role: not registered now (already registered on a re-run?)" >&2
done
dagnet subnet stake 1000 --network "$NETWORK" --netuid "$NETUID" --dev-key //Alice >/dev/null

provider=$(python -c "from bittensor.sp_core import Keypair; print(Keypair.create_from_uri('//Eve').ss58_address)")
printf '[{"uid": 0, "hotkey": "%s", "url": "http://127.0.0.1:8094"}]\n' "$provider" > "$DATA/providers.json"
echo "bootstrap: subnet $NETUID ready on $NETWORK"
