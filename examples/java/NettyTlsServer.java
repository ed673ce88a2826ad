// SPDX-License-Identifier: Apache-2.0
// An HTTPS server on Netty with netty-tcnative's BoringSSL (SslProvider.OPENSSL: what gRPC-Java, Cassandra and
// Kafka clients load for speed): `java NettyTlsServer CERT.pem KEY.pem [GROUPS]` (a PKCS#8 key; GROUPS such as
// X25519MLKEM768:X25519, the key exchange groups in the server's order) listens on a free loopback port, prints
// "listening 127.0.0.1:PORT", and answers every request with a short text, closing the connection when the
// request asks. Netty extracts the native library to a temporary file and deletes it once loaded.
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.OpenSslContextOption;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.io.File;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

public class NettyTlsServer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2 && args.length != 3) {
            System.err.println("usage: java NettyTlsServer CERT.pem KEY.pem [GROUPS]");
            System.exit(2);
        }
        if (!OpenSsl.isAvailable()) {
            throw new IllegalStateException("netty-tcnative did not load", OpenSsl.unavailabilityCause());
        }
        SslContextBuilder builder = SslContextBuilder.forServer(new File(args[0]), new File(args[1]))
                .sslProvider(SslProvider.OPENSSL);
        if (args.length == 3) {
            builder.option(OpenSslContextOption.GROUPS, args[2].split(":"));
        }
        SslContext tls = builder.build();
        NioEventLoopGroup group = new NioEventLoopGroup(2);
        Channel server = new ServerBootstrap()
                .group(group)
                .channel(NioServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline()
                                .addLast(tls.newHandler(ch.alloc()))
                                .addLast(new HttpServerCodec())
                                .addLast(new HttpObjectAggregator(4096))
                                .addLast(new Answer());
                    }
                })
                .bind(new InetSocketAddress("127.0.0.1", 0))
                .sync()
                .channel();
        System.out.println("listening 127.0.0.1:" + ((InetSocketAddress) server.localAddress()).getPort());
        System.out.flush();
        server.closeFuture().sync();
    }

    static final class Answer extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
            FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                    Unpooled.copiedBuffer("ok\n", StandardCharsets.US_ASCII));
            response.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/plain");
            HttpUtil.setContentLength(response, response.content().readableBytes());
            boolean keepAlive = HttpUtil.isKeepAlive(request);
            HttpUtil.setKeepAlive(response, keepAlive);
            if (keepAlive) {
                ctx.writeAndFlush(response);
            } else {
                ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE);
            }
        }
    }
}
