// dagnet under pm2 (docs/operating.md#running-under-pm2): `pm2 start deploy/pm2/ecosystem.config.js`
// from the checkout, after scripts/bootstrap --runtime. Edit the env blocks (or export the
// variables before `pm2 start`): BT_NETWORK, DAGNET_NETUID, the wallets, the miner's port.
// Each app runs in its own state folder (created if missing) under DAGNET_STATE_DIR.
const path = require("path");
const fs = require("fs");

const checkout = path.resolve(__dirname, "..", "..");
const dagnet = path.join(checkout, ".venv", "bin", "dagnet");
const stateDir = process.env.DAGNET_STATE_DIR || path.join(require("os").homedir(), ".dagnet", "pm2");
const network = process.env.BT_NETWORK || "test";
const netuid = process.env.DAGNET_NETUID || "1";

function folder(name) {
  const dir = path.join(stateDir, name);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// What the neurons need of a supervisor: SIGTERM first, then time to finish (the validator
// ends its step in flight, at most step_deadline_s = 90 s; a miner its queries in flight),
// then SIGKILL; restarts with a delay that grows while a neuron keeps failing.
const policy = {
  interpreter: "none",          // dagnet is a console script, not a Node program
  autorestart: true,
  exp_backoff_restart_delay: 1000,
  max_restarts: 1000000,         // a month unattended outlives any chain outage
  min_uptime: 60000,
  kill_signal: "SIGTERM",
  treekill: true,                // the planning processes and sandboxed programs die too
  time: true,
};

module.exports = {
  apps: [
    {
      name: "dagnet-validator",
      script: dagnet,
      args: ["validator", "--wallet.name", process.env.DAGNET_VALIDATOR_WALLET || "validator",
             "--netuid", netuid, "--port", "9100"],
      cwd: folder("validator"),     // validator.sqlite, its default --state, lives here
      env: { BT_NETWORK: network, BT_WALLET_HOTKEY: "default", PYTHONUNBUFFERED: "1" },
      kill_timeout: 120000,
      ...policy,
    },
    {
      name: "dagnet-miner",
      script: dagnet,
      args: ["miner", "--wallet.name", process.env.DAGNET_MINER_WALLET || "miner", "--netuid", netuid,
             "--host", "0.0.0.0", "--port", process.env.DAGNET_MINER_PORT || "8091",
             "--set", "feedback_db=feedback.sqlite"],
      cwd: folder("miner"),
      env: { BT_NETWORK: network, BT_WALLET_HOTKEY: "default", PYTHONUNBUFFERED: "1" },
      kill_timeout: 30000,
      ...policy,
    },
  ],
};
