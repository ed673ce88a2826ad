// SPDX-License-Identifier: Apache-2.0
//! What advice tells each kind of server to change, in one table keyed by (phrase, kind): a rule asks for
//! its phrase, and the targets' kinds decide which wording the advice gives.

use crate::catalogue::servers::Server;

/// A change that depends on the kind of server: a whole sentence, or the part of one a rule fills in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phrase {
    EcdsaCertificate,
    /// Where the alternative's cost quoted for a certificate change comes from, where it is not the
    /// server's own code.
    EcdsaSpeedSource,
    SessionResumption,
    RefusedTicketKey,
    RefusedSessionCache,
    RefusedVersion,
    RefusedUnknown,
    KeyExchange,
    /// The setting that leaves the hybrid group out.
    HybridKeyExchange,
    AlgorithmLookups,
    HandshakeFlight,
    ClientConnectionReuse,
}

/// A phrase's wording for one kind; None where the rule says nothing to that kind.
fn wording(phrase: Phrase, kind: Server) -> Option<&'static str> {
    Some(match (phrase, kind) {
        (Phrase::EcdsaCertificate, Server::Nginx) => "Serve an ECDSA P-256 certificate: add a second `ssl_certificate`/`ssl_certificate_key` pair with the ECDSA key (nginx picks it for clients that support it and keeps RSA for the rest).",
        (Phrase::EcdsaCertificate, Server::Node) => "Serve an ECDSA P-256 certificate: tls.createServer({ key: [ecdsaKey, rsaKey], cert: [ecdsaCert, rsaCert] }) (Node.js picks ECDSA for clients that support it).",
        (Phrase::EcdsaCertificate, Server::Go) => "Serve an ECDSA P-256 certificate: put a tls.Certificate with an ECDSA key first in tls.Config.Certificates, before the RSA one (Go serves the first one the client supports), or pick it in tls.Config.GetCertificate with ClientHelloInfo.SupportsCertificate.",
        (Phrase::EcdsaCertificate, Server::Rustls) => "Serve an ECDSA P-256 certificate: give ServerConfig a certificate with an ECDSA key (`with_single_cert`), or a `ResolvesServerCert` that picks ECDSA for clients whose `signature_schemes()` allow it and RSA for the rest.",
        (Phrase::EcdsaCertificate, Server::Haproxy) => "Serve an ECDSA P-256 certificate beside the RSA one: list both in a `crt-list`, or keep `site.pem.ecdsa` and `site.pem.rsa` side by side for `crt site.pem` (`ssl-load-extra-files bundle`); HAProxy picks ECDSA for clients that support it.",
        (Phrase::EcdsaCertificate, Server::Java) => "Serve an ECDSA P-256 certificate: add an EC key entry to the keystore beside the RSA one (`keytool -genkeypair -keyalg EC -groupname secp256r1`, or import the CA-signed pair); the JDK's X509KeyManager picks ECDSA for clients that support it, and Netty's SslContextBuilder.forServer takes a KeyManagerFactory over that keystore.",
        (Phrase::EcdsaCertificate, Server::Other) => "Serve an ECDSA P-256 certificate (SSL_CTX_use_certificate/SSL_CTX_use_PrivateKey with an EC key, alongside the RSA one).",
        (Phrase::EcdsaSpeedSource, Server::Go) => ", OpenSSL's: Go's own ECDSA is not measured here",
        (Phrase::EcdsaSpeedSource, Server::Java) => ", OpenSSL's: the JDK's own ECDSA is not measured here",
        (Phrase::EcdsaSpeedSource, Server::Rustls) => ", OpenSSL's: AWS-LC's ECDSA is not measured here",
        (Phrase::EcdsaSpeedSource, Server::Nginx | Server::Node | Server::Haproxy | Server::Other) => return None,
        (Phrase::SessionResumption, Server::Nginx) => "Let clients resume: `ssl_session_cache shared:SSL:10m; ssl_session_timeout 1h; ssl_session_tickets on;` and, with several instances behind a balancer, the same `ssl_session_ticket_key` on all of them.",
        (Phrase::SessionResumption, Server::Node) => "Let clients resume: keep session tickets on (the default) and give every worker the same `ticketKeys` (tls.createServer({ ticketKeys })), or handle 'newSession'/'resumeSession' with a shared cache.",
        (Phrase::SessionResumption, Server::Go) => "Let clients resume: keep session tickets on (tls.Config.SessionTicketsDisabled false, the default) and, with several instances behind a balancer, give them all the same ticket keys with tls.Config.SetSessionTicketKeys (rotated together): each instance otherwise makes its own, and a ticket from one is a full handshake on another.",
        (Phrase::SessionResumption, Server::Rustls) => "Let clients resume: keep `ServerConfig.session_storage` (a `ServerSessionMemoryCache` of enough sessions, the default holds 256) or set a `ticketer` (`aws_lc_rs::Ticketer::new()`) and keep `send_tls13_tickets` above 0; with several instances behind a balancer, share the store or the ticket keys.",
        (Phrase::SessionResumption, Server::Haproxy) => "Let clients resume: keep session tickets on (no `no-tls-tickets`), keep the session cache (`tune.ssl.cachesize`, shared by HAProxy's threads) and, with several instances behind a balancer, give every `bind` the same `tls-ticket-keys` file.",
        (Phrase::SessionResumption, Server::Java) => "Let clients resume: keep the JDK's session cache (`javax.net.ssl.sessionCacheSize`, 20,480 by default; SSLSessionContext.setSessionTimeout) and its stateless tickets (`jdk.tls.server.enableSessionTicketExtension` not set to false); on Netty, SslContextBuilder.sessionCacheSize/sessionTimeout; and keep connections alive (HTTP keep-alive) so fewer need a handshake at all.",
        (Phrase::SessionResumption, Server::Other) => "Let clients resume: enable the session cache (SSL_CTX_set_session_cache_mode) and session tickets, with ticket keys shared across instances.",
        (Phrase::RefusedTicketKey, Server::Nginx) => "Keep ticket keys across reloads and instances: make a key file (`openssl rand 80 > ticket.key`), set `ssl_session_ticket_key ticket.key;` on every instance, and rotate the files together (the new key first, the previous one after it, so that its tickets still resume).",
        (Phrase::RefusedTicketKey, Server::Node) => "Give every process and instance the same ticket keys: tls.createServer({ ticketKeys }) with 48 bytes from your configuration, rotated together (server.setTicketKeys).",
        (Phrase::RefusedTicketKey, Server::Go) => "Give every instance the same ticket keys with tls.Config.SetSessionTicketKeys, rotated together (the new key first).",
        (Phrase::RefusedTicketKey, Server::Rustls) => "Give every instance the same ticket keys: a `ProducesTickets` of your own with keys from your configuration as `ServerConfig.ticketer`, rotated together (rustls' own Ticketer makes fresh keys in each process).",
        (Phrase::RefusedTicketKey, Server::Haproxy) => "Keep ticket keys across reloads and instances: `bind ... ssl tls-ticket-keys /etc/haproxy/tls-ticket-keys` with the same file on every instance, rotated together (keep the previous key in the file, so that its tickets still resume).",
        (Phrase::RefusedTicketKey, Server::Java) => "The JDK makes its ticket keys in each process and rotates them itself: behind a balancer, send returning clients to the same instance, or terminate TLS where keys are shared; Netty on OpenSSL or BoringSSL takes shared keys with OpenSslServerContext.setTicketKeys.",
        (Phrase::RefusedTicketKey, Server::Other) => "Keep session ticket keys across restarts and instances (the server's ticket key file, or SSL_CTX_set_tlsext_ticket_key_evp_cb), rotated together.",
        (Phrase::RefusedSessionCache, Server::Nginx) => "Make the session cache shared and big enough: `ssl_session_cache shared:SSL:50m;` (about 4,000 sessions a megabyte) with `ssl_session_timeout` longer than clients take to return; `builtin` caches are per worker. Across instances, resume by tickets with a shared `ssl_session_ticket_key`.",
        (Phrase::RefusedSessionCache, Server::Node) => "Resume by tickets with shared ticketKeys, or back 'newSession'/'resumeSession' with a cache every worker shares, sized for the clients' return interval.",
        (Phrase::RefusedSessionCache, Server::Go) => "Go's server resumes by tickets: keep them on and share their keys across instances (tls.Config.SetSessionTicketKeys).",
        (Phrase::RefusedSessionCache, Server::Rustls) => "Size `ServerConfig.session_storage` for the clients' return interval (ServerSessionMemoryCache::new(N); the default holds 256 sessions) and share it across instances (a `StoresServerSessions` of your own), or resume by tickets (`ServerConfig.ticketer`).",
        (Phrase::RefusedSessionCache, Server::Haproxy) => "Raise `tune.ssl.cachesize` (sessions) and `tune.ssl.lifetime` to cover the clients' return interval; across instances, resume by tickets with one `tls-ticket-keys` file.",
        (Phrase::RefusedSessionCache, Server::Java) => "Make the session cache big enough and long-lived enough: `-Djavax.net.ssl.sessionCacheSize=` and SSLSessionContext.setSessionTimeout covering the clients' return interval (on Netty, SslContextBuilder.sessionCacheSize/sessionTimeout); across instances, resume by tickets.",
        (Phrase::RefusedSessionCache, Server::Other) => "Size the session cache (SSL_CTX_sess_set_cache_size) and its timeout (SSL_CTX_set_timeout) for the clients' return interval and share it across workers, or resume by tickets with shared keys.",
        (Phrase::RefusedVersion, Server::Nginx) => "Offer the same `ssl_protocols` on every instance and keep them across changes: a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse (clients resume again once they hold sessions of the new version).",
        (Phrase::RefusedVersion, Server::Node) => "Offer the same minVersion/maxVersion on every instance: a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse.",
        (Phrase::RefusedVersion, Server::Go) => "Offer the same tls.Config.MinVersion/MaxVersion on every instance: a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse.",
        (Phrase::RefusedVersion, Server::Rustls) => "Offer the same protocol versions on every instance (`ServerConfig::builder_with_protocol_versions`): a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse.",
        (Phrase::RefusedVersion, Server::Haproxy) => "Offer the same `ssl-min-ver`/`ssl-max-ver` on every instance: a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse.",
        (Phrase::RefusedVersion, Server::Java) => "Offer the same protocols on every instance (`jdk.tls.server.protocols`, SSLParameters.setProtocols; on Netty, SslContextBuilder.protocols): a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse.",
        (Phrase::RefusedVersion, Server::Other) => "Offer the same protocol versions on every instance: a TLS 1.2 session cannot resume a TLS 1.3 handshake, nor the reverse.",
        (Phrase::RefusedUnknown, Server::Nginx) => "Check that every instance has the same `ssl_session_ticket_key` files and a shared `ssl_session_cache`, and that `ssl_session_timeout` covers the clients' return interval.",
        (Phrase::RefusedUnknown, Server::Node) => "Check that every instance has the same ticketKeys and that sessions live as long as clients take to return (sessionTimeout).",
        (Phrase::RefusedUnknown, Server::Go) => "Go's tickets carry no key name, so the wire does not tell why: check that every instance has the same keys (tls.Config.SetSessionTicketKeys, or one tls.Config shared by the listeners of a process) and that clients return within the tickets' 7-day lifetime.",
        (Phrase::RefusedUnknown, Server::Rustls) => "Check that every instance shares its session store or ticket keys (`ServerConfig.session_storage`, `ServerConfig.ticketer`) and that sessions live as long as clients take to return.",
        (Phrase::RefusedUnknown, Server::Haproxy) => "Check that every instance has the same `tls-ticket-keys` file and that `tune.ssl.lifetime` covers the clients' return interval.",
        (Phrase::RefusedUnknown, Server::Java) => "Check that returning clients reach an instance that holds their session (the JDK's ticket keys are per process) and that `javax.net.ssl.sessionCacheSize` and the session timeout cover the clients' return interval.",
        (Phrase::RefusedUnknown, Server::Other) => "Check that ticket keys and the session cache are shared across instances and that sessions live as long as clients take to return.",
        (Phrase::KeyExchange, Server::Nginx) => "Use an elliptic-curve exchange: put ECDHE suites first in `ssl_ciphers` (or drop DHE ones and `ssl_dhparam`), offer TLSv1.3 in `ssl_protocols`, and `ssl_ecdh_curve X25519:prime256v1;`.",
        (Phrase::KeyExchange, Server::Node) => "Use an elliptic-curve exchange: tls.createServer({ ecdhCurve: 'X25519:P-256', ciphers: ECDHE suites first, minVersion: 'TLSv1.2' }) and allow TLSv1.3.",
        (Phrase::KeyExchange, Server::Go) => "Use X25519 or P-256: tls.Config.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}.",
        (Phrase::KeyExchange, Server::Rustls) => "Use X25519 or P-256: list them first in the CryptoProvider's `kx_groups`.",
        (Phrase::KeyExchange, Server::Haproxy) => "Use an elliptic-curve exchange: `curves X25519:P-256` on the `bind` line (or `ssl-default-bind-curves`), ECDHE suites first in `ciphers`, and TLSv1.3 allowed (`ssl-max-ver TLSv1.3`).",
        (Phrase::KeyExchange, Server::Java) => "Use an elliptic-curve exchange: `-Djdk.tls.namedGroups=x25519,secp256r1` and ECDHE suites first (`jdk.tls.server.cipherSuites`, SSLParameters.setCipherSuites), TLSv1.3 allowed.",
        (Phrase::KeyExchange, Server::Other) => "Use an elliptic-curve exchange: prefer ECDHE suites and X25519 (SSL_CTX_set1_groups_list(ctx, \"X25519:P-256\")).",
        (Phrase::HybridKeyExchange, Server::Go) => "tls.Config.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256} (or GODEBUG=tlsmlkem=0)",
        (Phrase::HybridKeyExchange, Server::Nginx) => "`ssl_ecdh_curve X25519:prime256v1;`",
        (Phrase::HybridKeyExchange, Server::Haproxy) => "`curves X25519:P-256` on the `bind` line (or `ssl-default-bind-curves`)",
        (Phrase::HybridKeyExchange, Server::Java) => "`-Djdk.tls.namedGroups=x25519,secp256r1` (on Netty, SslContextOption OpenSslContextOption.GROUPS)",
        (Phrase::HybridKeyExchange, Server::Other) => "SSL_CTX_set1_groups_list(ctx, \"X25519:P-256\")",
        (Phrase::HybridKeyExchange, Server::Node) => "tls.createServer({ ecdhCurve: 'X25519:P-256' })",
        (Phrase::HybridKeyExchange, Server::Rustls) => "X25519 and P-256 alone in the CryptoProvider's `kx_groups`",
        (Phrase::AlgorithmLookups, Server::Haproxy) => "run an HAProxy built against one of them (HAProxy supports AWS-LC; its official images use it since 3.3) and compare with `tlsprof diff`",
        (Phrase::AlgorithmLookups, Server::Java) => "compare a newer JDK, or Netty on netty-tcnative (BoringSSL), with `tlsprof diff`",
        (Phrase::AlgorithmLookups, Server::Nginx) => "build nginx against one of them (nginx supports BoringSSL and AWS-LC) and compare with `tlsprof diff`",
        (Phrase::AlgorithmLookups, Server::Node) => "a newer Node.js release links a newer OpenSSL; compare with `tlsprof diff`",
        (Phrase::AlgorithmLookups, Server::Go | Server::Rustls | Server::Other) => "link against one of them and compare with `tlsprof diff`",
        (Phrase::HandshakeFlight, Server::Nginx) => "`ssl_certificate` holds the chain nginx sends; each ticket sent after the handshake is another write",
        (Phrase::HandshakeFlight, Server::Node) => "the `cert` chain given to tls.createServer is what is sent; each ticket is another write",
        (Phrase::HandshakeFlight, Server::Go) => "the tls.Certificate's Certificate chain is what is sent; Go sends one ticket per TLS 1.3 handshake",
        (Phrase::HandshakeFlight, Server::Rustls) => "the certificate chain given to ServerConfig is what is sent; `send_tls13_tickets` (4 by default) tickets follow each TLS 1.3 handshake",
        (Phrase::HandshakeFlight, Server::Haproxy) => "the `crt` file holds the chain HAProxy sends; each ticket sent after the handshake is another write",
        (Phrase::HandshakeFlight, Server::Java) => "the keystore entry's certificate chain is what is sent; each ticket the JDK sends after a TLS 1.3 handshake is another write",
        (Phrase::HandshakeFlight, Server::Other) => "SSL_CTX_set_num_tickets; each ticket is another write",
        (Phrase::ClientConnectionReuse, Server::Haproxy) => "Reuse connections to the servers (`http-reuse safe`, the default, or `always`) and keep TLS session reuse to them on (no `no-ssl-reuse` on the `server` lines).",
        (Phrase::ClientConnectionReuse, Server::Java) => "Reuse connections: one java.net.http.HttpClient for all requests (it keeps connections alive; `jdk.httpclient.keepalive.timeout`), or a pooled client (Apache HttpClient's PoolingHttpClientConnectionManager, OkHttp's ConnectionPool); new connections resume from the SSLContext's client session cache.",
        (Phrase::ClientConnectionReuse, Server::Node) => "Reuse connections: new https.Agent({ keepAlive: true, maxSockets: N }) for outbound requests; connections that must be new can still resume sessions (the Agent caches them: maxCachedSessions).",
        (Phrase::ClientConnectionReuse, Server::Go) => "Reuse connections: share one http.Client (its http.Transport keeps connections alive unless DisableKeepAlives is set) and raise http.Transport.MaxIdleConnsPerHost (2 by default) to the number of concurrent requests per host; connections that must be new can resume: tls.Config.ClientSessionCache = tls.NewLRUClientSessionCache(0).",
        (Phrase::ClientConnectionReuse, Server::Nginx | Server::Rustls | Server::Other) => "Reuse connections (HTTP keep-alive, a connection pool) and resume TLS sessions on the new ones (SSL_set_session with the previous session).",
    })
}

/// A remark for whichever of the targets' kinds has one, made once; empty when none has.
pub(super) fn remark(phrase: Phrase, kinds: &[Server]) -> &'static str {
    kinds.iter().find_map(|&k| wording(phrase, k)).unwrap_or_default()
}

/// A phrase for the targets' kinds (each once, in order): for one kind, its wording as it is; for several,
/// each kind's wording after its name, kinds worded alike named together.
pub(super) fn for_kinds(phrase: Phrase, kinds: &[Server]) -> String {
    if let [kind] = kinds {
        return wording(phrase, *kind).unwrap_or_default().to_string();
    }
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for &kind in kinds {
        let Some(text) = wording(phrase, kind) else {
            continue;
        };
        match groups.iter_mut().find(|(_, t)| *t == text) {
            Some((names, _)) => names.push(kind.name()),
            None => groups.push((vec![kind.name()], text)),
        }
    }
    // Whole sentences lose their full stops inside the list and the list ends with one.
    let end = if groups.iter().any(|(_, t)| t.ends_with('.')) {
        "."
    } else {
        ""
    };
    let parts: Vec<String> = groups
        .iter()
        .map(|(names, text)| format!("{}: {}", names.join(", "), text.trim_end_matches('.')))
        .collect();
    parts.join("; ") + end
}
