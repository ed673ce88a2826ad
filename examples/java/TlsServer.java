// SPDX-License-Identifier: Apache-2.0
// An HTTPS server on the JDK's own TLS (JSSE, SSLContext "TLS" with the default providers):
// `java TlsServer KEYSTORE.p12 PASSWORD` listens on a free loopback port, prints "listening 127.0.0.1:PORT",
// and answers every request with a short text. Its handshakes run in Java code the JIT compiles: no native TLS
// library tlsprof could probe, so it is counted from the wire (and, with frame pointers, profiled from its
// frames).
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.FileInputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.util.concurrent.Executors;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

public class TlsServer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: java TlsServer KEYSTORE.p12 PASSWORD");
            System.exit(2);
        }
        char[] password = args[1].toCharArray();
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[0])) {
            store.load(in, password);
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, password);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(keys.getKeyManagers(), null, null);
        HttpsServer server = HttpsServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
        server.setHttpsConfigurator(new HttpsConfigurator(tls));
        byte[] body = "ok\n".getBytes(StandardCharsets.US_ASCII);
        server.createContext("/", exchange -> {
            exchange.getResponseHeaders().set("Content-Type", "text/plain");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.setExecutor(Executors.newFixedThreadPool(2));
        server.start();
        System.out.println("listening 127.0.0.1:" + server.getAddress().getPort());
        System.out.flush();
    }
}
