// SPDX-License-Identifier: Apache-2.0
// Minimal loopback HTTPS server, a Node.js (bundled OpenSSL) target for tlsprof. Written for every Node.js
// from 8 on (OpenSSL 1.0.2, 1.1.1, 3.x): no `node:` imports, util.parseArgs or optional catch bindings.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const https = require('https');

const USAGE = 'usage: node https-server.js --port P --key KEY.pem --cert CERT.pem [--tickets on|off] ' +
  '[--ecdh-curve NAME[:NAME...]]';

function parse(argv) {
  const opts = { tickets: 'off' };
  const known = ['port', 'key', 'cert', 'tickets', 'ecdh-curve'];
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--') || !known.includes(name) || i + 1 >= argv.length) {
      return null;
    }
    opts[name] = argv[i + 1];
  }
  return opts;
}

const opts = parse(process.argv.slice(2)) || {};
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
const options = {
  key,
  cert,
  secureOptions: opts.tickets === 'off' ? crypto.constants.SSL_OP_NO_TICKET : 0,
};
if (opts['ecdh-curve']) {
  options.ecdhCurve = opts['ecdh-curve'];
}
const server = https.createServer(options, (req, res) => {
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
    server.close(() => process.exit(0));
    // Keep-alive connections would otherwise hold close() open indefinitely (Node.js 18.2 and later).
    if (server.closeAllConnections) {
      server.closeAllConnections();
    } else {
      process.exit(0);
    }
  });
}
