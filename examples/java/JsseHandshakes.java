// SPDX-License-Identifier: Apache-2.0
// The ground-truth fixture of the JDK's own TLS (JSSE), as tests/fixtures/crypto_ops.c is of libcrypto's:
// `java -XX:+PreserveFramePointer JsseHandshakes KEYSTORE.p12 PASSWORD N` makes TLS handshakes between a
// client and a server SSLEngine in memory, one thread and no sockets, until the JIT has compiled them; prints
// "ready" and waits for a line on its standard input (a profiler attaches meanwhile); then makes N full
// handshakes, each timed by its thread's own CPU clock, and after each signs once with the certificate's key
// as the handshake does (Signature.sign alone, timed the same way), so that both truths are taken at the same
// time as what they check; prints them as one JSON line, and exits once its standard input closes (while it
// runs, a profiler can still ask the JVM to name the code it compiled). The client trusts the keystore's certificate and
// checks it as any client does; it names no peer, so nothing is resumed.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Signature;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.TrustManagerFactory;

public class JsseHandshakes {
    /** Handshakes made before "ready": enough for the JIT to compile the handshake's code. */
    private static final int WARM_UP = 1500;

    private static final ThreadMXBean THREAD = ManagementFactory.getThreadMXBean();
    private static final ByteBuffer NOTHING = ByteBuffer.allocate(0);

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: java JsseHandshakes KEYSTORE.p12 PASSWORD N");
            System.exit(2);
        }
        char[] password = args[1].toCharArray();
        int n = Integer.parseInt(args[2]);
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[0])) {
            store.load(in, password);
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, password);
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(store);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(keys.getKeyManagers(), trust.getTrustManagers(), null);
        PrivateKey key = (PrivateKey) store.getKey(store.aliases().nextElement(), password);
        // What TLS 1.3 signs with this key: the CertificateVerify's scheme for EC P-256 or RSA.
        String algorithm = key.getAlgorithm().equals("EC") ? "SHA256withECDSA" : "RSASSA-PSS";
        // A CertificateVerify's content: 64 spaces, the context string, a zero and a SHA-256 transcript hash.
        byte[] signed = new byte[130];

        for (int i = 0; i < WARM_UP; i++) {
            handshake(tls);
            sign(key, algorithm, signed);
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader input = new BufferedReader(new InputStreamReader(System.in));
        input.readLine();

        long handshakeNs = 0;
        long signNs = 0;
        long clockNs = 0;
        String protocol = "";
        for (int i = 0; i < n; i++) {
            long start = THREAD.getCurrentThreadCpuTime();
            protocol = handshake(tls);
            long between = THREAD.getCurrentThreadCpuTime();
            long end = THREAD.getCurrentThreadCpuTime();
            handshakeNs += between - start;
            clockNs += end - between;
            signNs += sign(key, algorithm, signed);
        }
        System.out.printf(
                "{\"library\": \"jsse\", \"protocol\": \"%s\", \"key\": \"%s\", \"handshakes\": %d, \"signs\": %d, "
                        + "\"handshake_cpu_us\": %.3f, \"sign_cpu_us\": %.3f, \"clock_cost_us\": %.3f}%n",
                protocol, key.getAlgorithm(), n, n, handshakeNs / 1e3 / n, signNs / 1e3 / n, clockNs / 1e3 / n);
        System.out.flush();
        while (input.readLine() != null) {
        }
    }

    /** One signature made as JSSE makes its CertificateVerify's; the CPU nanoseconds of Signature.sign alone. */
    private static long sign(PrivateKey key, String algorithm, byte[] signed) throws Exception {
        Signature signature = Signature.getInstance(algorithm);
        if (algorithm.equals("RSASSA-PSS")) {
            signature.setParameter(new java.security.spec.PSSParameterSpec(
                    "SHA-256", "MGF1", java.security.spec.MGF1ParameterSpec.SHA256, 32, 1));
        }
        signature.initSign(key);
        signature.update(signed);
        long start = THREAD.getCurrentThreadCpuTime();
        signature.sign();
        return THREAD.getCurrentThreadCpuTime() - start;
    }

    /** A full handshake between a new client and server engine of `tls`, with what the server sends after
     * it (TLS 1.3's session ticket) taken in; returns the protocol agreed. */
    private static String handshake(SSLContext tls) throws Exception {
        SSLEngine client = tls.createSSLEngine();
        client.setUseClientMode(true);
        SSLEngine server = tls.createSSLEngine();
        server.setUseClientMode(false);
        int size = client.getSession().getPacketBufferSize() * 4;
        ByteBuffer toServer = ByteBuffer.allocate(size);
        ByteBuffer toClient = ByteBuffer.allocate(size);
        ByteBuffer application = ByteBuffer.allocate(client.getSession().getApplicationBufferSize() * 2);
        client.beginHandshake();
        server.beginHandshake();
        for (int round = 0; round < 64; round++) {
            boolean moved = step(client, toServer, toClient, application);
            moved |= step(server, toClient, toServer, application);
            if (!moved && toServer.position() == 0 && toClient.position() == 0) {
                if (client.getHandshakeStatus() != HandshakeStatus.NOT_HANDSHAKING
                        || server.getHandshakeStatus() != HandshakeStatus.NOT_HANDSHAKING) {
                    throw new IllegalStateException("handshake stalled");
                }
                return client.getSession().getProtocol();
            }
        }
        throw new IllegalStateException("handshake did not end");
    }

    /** What `engine` does next: writes its records into `out`, reads the peer's from `in`, runs its tasks.
     * Whether anything moved. */
    private static boolean step(SSLEngine engine, ByteBuffer out, ByteBuffer in, ByteBuffer application)
            throws Exception {
        boolean moved = false;
        while (true) {
            HandshakeStatus status = engine.getHandshakeStatus();
            if (status == HandshakeStatus.NEED_TASK) {
                for (Runnable task; (task = engine.getDelegatedTask()) != null; ) {
                    task.run();
                }
                moved = true;
            } else if (status == HandshakeStatus.NEED_WRAP) {
                SSLEngineResult result = engine.wrap(NOTHING, out);
                check(result);
                moved = true;
            } else if (in.position() > 0) {
                in.flip();
                application.clear();
                SSLEngineResult result = engine.unwrap(in, application);
                in.compact();
                check(result);
                if (result.bytesConsumed() == 0) {
                    return moved;
                }
                moved = true;
            } else {
                return moved;
            }
        }
    }

    private static void check(SSLEngineResult result) {
        if (result.getStatus() != SSLEngineResult.Status.OK) {
            throw new IllegalStateException("engine: " + result);
        }
    }
}
