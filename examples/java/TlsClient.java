// SPDX-License-Identifier: Apache-2.0
// The JDK's HttpClient as a TLS client (JSSE): `java -Djdk.internal.httpclient.disableHostnameVerification=true
// TlsClient HOST:PORT N` waits for a line on its standard input (a profiler attaches meanwhile), then makes N
// HTTPS requests, each from a client of its own and so on a connection and handshake of its own (one SSLContext
// for all, whose session cache resumes them), and prints how many it made as one JSON line. Test servers use
// throwaway self-signed certificates: it trusts any.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;

public class TlsClient {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: java TlsClient HOST:PORT N");
            System.exit(2);
        }
        TrustManager trustAny = new X509TrustManager() {
            public void checkClientTrusted(X509Certificate[] chain, String type) {}
            public void checkServerTrusted(X509Certificate[] chain, String type) {}
            public X509Certificate[] getAcceptedIssuers() {
                return new X509Certificate[0];
            }
        };
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, new TrustManager[] {trustAny}, new SecureRandom());
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        URI uri = URI.create("https://" + args[0] + "/");
        int n = Integer.parseInt(args[1]);
        int made = 0;
        for (int i = 0; i < n; i++) {
            HttpClient client = HttpClient.newBuilder().sslContext(tls).build();
            HttpResponse<String> response = client.send(HttpRequest.newBuilder(uri).build(),
                    HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() == 200) {
                made++;
            }
        }
        System.out.println("{\"connections\": " + made + "}");
    }
}
