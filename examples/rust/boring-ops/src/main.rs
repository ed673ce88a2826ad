// SPDX-License-Identifier: Apache-2.0
//! Ground-truth fixture for BoringSSL: `boring-ops [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin]
//! [--op-log PATH] N` makes N full TLS 1.3 handshakes in memory, a client and a server of this process taking
//! turns, the server with a certificate key of `--sign` and the group of `--derive`, no tickets or session cache.
//! It times the server's handshake calls (`SSL_do_handshake`, summed per connection: a *handshake*) and the
//! signature inside them: the server signs through a private-key method (the hook a server uses for a key held
//! elsewhere), which BoringSSL calls from `bssl::ssl_private_key_sign`, so the fixture's clock runs around the
//! signature itself (a *sign*); `clock_cost_us` is what its clock's reads cost outside that window, inside the
//! function. Beside an unprobed twin (examples/rust/twin-clock).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::rc::Rc;

use boring::asn1::Asn1Time;
use boring::ec::{EcGroup, EcKey};
use boring::hash::MessageDigest;
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use boring::rsa::{Padding, Rsa};
use boring::sign::{RsaPssSaltlen, Signer};
use boring::ssl::{
    HandshakeError, MidHandshakeSslStream, PrivateKeyMethod, PrivateKeyMethodError, Ssl, SslContext, SslContextBuilder,
    SslMethod, SslOptions, SslRef, SslSessionCacheMode, SslSignatureAlgorithm, SslVerifyMode, SslVersion,
};
use boring::x509::{X509Builder, X509NameBuilder, X509};
use twin_clock::{fail, measure, Options, Sample};

const HANDSHAKE: usize = 0;
const SIGN: usize = 1;

thread_local! {
    /// The signature the private-key method made during the server's last handshake call.
    static SIGNED: Cell<Option<Sample>> = const { Cell::new(None) };
}

/// Signs with the certificate's key, on the clock.
struct TimedKey(PKey<Private>);

impl PrivateKeyMethod for TimedKey {
    fn sign(
        &self,
        _ssl: &mut SslRef,
        input: &[u8],
        algorithm: SslSignatureAlgorithm,
        output: &mut [u8],
    ) -> Result<usize, PrivateKeyMethodError> {
        let (signed, sample) = measure(|| -> Result<usize, boring::error::ErrorStack> {
            let mut signer = Signer::new(MessageDigest::sha256(), &self.0)?;
            if algorithm == SslSignatureAlgorithm::RSA_PSS_RSAE_SHA256 {
                signer.set_rsa_padding(Padding::PKCS1_PSS)?;
                signer.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)?;
            }
            signer.sign_oneshot(output, input)
        });
        SIGNED.set(Some(sample));
        signed.map_err(|_| PrivateKeyMethodError::FAILURE)
    }

    fn decrypt(&self, _: &mut SslRef, _: &[u8], _: &mut [u8]) -> Result<usize, PrivateKeyMethodError> {
        Err(PrivateKeyMethodError::FAILURE)
    }

    fn complete(&self, _: &mut SslRef, _: &mut [u8]) -> Result<usize, PrivateKeyMethodError> {
        Err(PrivateKeyMethodError::FAILURE)
    }
}

/// One end of an in-memory connection: reads what the other end wrote, WouldBlock when there is nothing yet.
struct Pipe {
    rx: Rc<RefCell<VecDeque<u8>>>,
    tx: Rc<RefCell<VecDeque<u8>>>,
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut rx = self.rx.borrow_mut();
        if rx.is_empty() {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        rx.read(buf)
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tx.borrow_mut().extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn pipes() -> (Pipe, Pipe) {
    let (a, b) = (Rc::default(), Rc::default());
    (
        Pipe {
            rx: Rc::clone(&a),
            tx: Rc::clone(&b),
        },
        Pipe { rx: b, tx: a },
    )
}

fn certificate(key: &PKey<Private>) -> Result<X509, boring::error::ErrorStack> {
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_nid(Nid::COMMONNAME, "localhost")?;
    let name = name.build();
    let mut cert = X509Builder::new()?;
    cert.set_version(2)?;
    cert.set_subject_name(&name)?;
    cert.set_issuer_name(&name)?;
    cert.set_pubkey(key)?;
    let (from, until) = (Asn1Time::days_from_now(0)?, Asn1Time::days_from_now(1)?);
    cert.set_not_before(&from)?;
    cert.set_not_after(&until)?;
    cert.sign(key, MessageDigest::sha256())?;
    Ok(cert.build())
}

fn context(options: &Options) -> Result<(SslContext, SslContext), boring::error::ErrorStack> {
    let (key, sigalg) = if options.sign_alg == "p256" {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
        (PKey::from_ec_key(EcKey::generate(&group)?)?, "ecdsa_secp256r1_sha256")
    } else {
        (PKey::from_rsa(Rsa::generate(2048)?)?, "rsa_pss_rsae_sha256")
    };
    let group = if options.derive_alg == "p256" {
        "P-256"
    } else {
        "X25519"
    };
    let tls13 = |b: &mut SslContextBuilder| -> Result<(), boring::error::ErrorStack> {
        b.set_min_proto_version(Some(SslVersion::TLS1_3))?;
        b.set_curves_list(group)?;
        b.set_sigalgs_list(sigalg)
    };
    let mut server = SslContext::builder(SslMethod::tls())?;
    tls13(&mut server)?;
    let cert = certificate(&key)?;
    server.set_certificate(&cert)?;
    server.set_private_key_method(TimedKey(key));
    server.set_options(SslOptions::NO_TICKET);
    server.set_session_cache_mode(SslSessionCacheMode::OFF);
    let mut client = SslContext::builder(SslMethod::tls())?;
    tls13(&mut client)?;
    client.set_verify(SslVerifyMode::NONE);
    client.set_session_cache_mode(SslSessionCacheMode::OFF);
    Ok((server.build(), client.build()))
}

/// One side's next handshake call: Some(side still under way), None once it has completed.
fn step(side: MidHandshakeSslStream<Pipe>) -> Option<MidHandshakeSslStream<Pipe>> {
    match side.handshake() {
        Ok(_) => None,
        Err(HandshakeError::WouldBlock(mid)) => Some(mid),
        Err(_) => fail("a handshake"),
    }
}

fn main() {
    let options = Options::parse(1, "N_HANDSHAKES");
    let (server_ctx, client_ctx) = context(&options).unwrap_or_else(|_| fail("setting up the contexts"));
    let connect = || {
        let (client_end, server_end) = pipes();
        let client = Ssl::new(&client_ctx)
            .unwrap_or_else(|_| fail("a client"))
            .setup_connect(client_end);
        let server = Ssl::new(&server_ctx)
            .unwrap_or_else(|_| fail("a server"))
            .setup_accept(server_end);
        (client, server)
    };
    let handshake = |clock: Option<&mut twin_clock::Clock>| {
        let (client, server) = connect();
        let mut clock = clock;
        let (mut c, mut s) = (Some(client), Some(server));
        while c.is_some() || s.is_some() {
            c = c.and_then(step);
            s = match (s, clock.as_deref_mut()) {
                (Some(side), Some(clock)) => clock.timed(HANDSHAKE, || step(side)),
                (side, _) => side.and_then(step),
            };
            if let (Some(clock), Some(signed)) = (clock.as_deref_mut(), SIGNED.take()) {
                clock.add(SIGN, signed);
                clock.end_op(SIGN);
            }
        }
        if let Some(clock) = clock {
            clock.end_op(HANDSHAKE);
        }
    };
    // First-use costs before the clock starts.
    handshake(None);
    let extra = format!(
        "\"clock_cost_us\":{:.3},\"library\":\"boringssl\"",
        twin_clock::clock_cost_us()
    );
    twin_clock::run(&options, ["handshake", "sign"], options.counts[0], &extra, |clock| {
        handshake(Some(clock))
    });
}
