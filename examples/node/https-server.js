// SPDX-License-Identifier: Apache-2.0
// Minimal loopback HTTPS server, a Node.js (bundled OpenSSL) target for tlsprof.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const https = require('node:https');
const { parseArgs } = require('node:util');

const USAGE = 'usage: node https-server.js --port P --key KEY.pem --cert CERT.pem [--tickets on|off]';

let opts;
try {
  opts = parseArgs({
    options: {
      port: { type: 'string' },
      key: { type: 'string' },
      cert: { type: 'string' },
      tickets: { type: 'string', default: 'off' },
    },
  }).values;
} catch {
  opts = {};
}
const port = Number(opts.port);
if (!Number.isInteger(port) || port < 0 || port > 65535 || !opts.key || !opts.cert ||
    !['on', 'off'].includes(opts.tickets)) {
  console.error(USAGE);
  process.exit(2);
}

let key, cert;
try {
  key = fs.readFileSync(opts.key);
  cert = fs.readFileSync(opts.cert);
} catch (err) {
  console.error(`https-server: ${err.message}`);
  process.exit(1);
}

// Node keeps no server-side session cache unless asked, so with tickets off every handshake is a full one.
const server = https.createServer({
  key,
  cert,
  secureOptions: opts.tickets === 'off' ? crypto.constants.SSL_OP_NO_TICKET : 0,
}, (req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/plain' });
  res.end('ok\n');
});

server.on('error', (err) => {
  console.error(`https-server: ${err.message}`);
  process.exit(1);
});

server.listen(port, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    // Keep-alive connections would otherwise hold close() open indefinitely.
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
