// SPDX-License-Identifier: Apache-2.0
// Loopback HTTPS client, a Node.js TLS client target for tlsprof: N sequential GETs, with or without keep-alive.
'use strict';

const https = require('node:https');
const { parseArgs } = require('node:util');

const USAGE = 'usage: node https-client.js --port P --count N [--keepalive on|off] [--wait-stdin]';
const LIMIT_MS = 60000;

let opts;
try {
  opts = parseArgs({
    options: {
      port: { type: 'string' },
      count: { type: 'string' },
      keepalive: { type: 'string', default: 'off' },
      'wait-stdin': { type: 'boolean', default: false },
    },
  }).values;
} catch {
  opts = {};
}
const port = Number(opts.port);
const count = Number(opts.count);
if (!Number.isInteger(port) || port <= 0 || port > 65535 || !Number.isInteger(count) || count < 1 ||
    !['on', 'off'].includes(opts.keepalive)) {
  console.error(USAGE);
  process.exit(2);
}

// Test servers use throwaway self-signed certificates, on loopback only.
const agent = new https.Agent({ keepAlive: opts.keepalive === 'on', maxSockets: 1, rejectUnauthorized: false });
const seen = new WeakSet();
let sockets = 0;
let reused = 0;

function get() {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('socket', (s) => {
      if (seen.has(s)) return;
      seen.add(s);
      sockets++;
      s.once('secureConnect', () => { if (s.isSessionReused()) reused++; });
    });
    req.on('error', reject);
  });
}

async function main() {
  if (opts['wait-stdin']) {
    console.log('ready');
    await new Promise((resolve) => process.stdin.once('data', resolve));
    process.stdin.destroy();
  }
  const timer = setTimeout(() => { console.error('https-client: time limit reached'); process.exit(1); }, LIMIT_MS);
  for (let i = 0; i < count; i++) await get();
  clearTimeout(timer);
  agent.destroy();
  console.log(JSON.stringify({ requests: count, connections: sockets, reused, keepalive: opts.keepalive === 'on' }));
}

main().catch((e) => { console.error(`https-client: ${e.message}`); process.exit(1); });
