// SPDX-License-Identifier: Apache-2.0
//! The kinds of server advice speaks to: how a server is configured decides how a change is worded. A
//! program is known by its name, or by a TLS library family that is configured the same way whatever the
//! program (families::Family::server).

/// A kind of server, in the order a change lists the kinds' wordings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    Nginx,
    Node,
    /// A Go program: crypto/tls, configured through tls.Config.
    Go,
    /// A Rust program on rustls, configured through its ServerConfig.
    Rustls,
    Haproxy,
    /// A JVM: the JDK's own TLS (JSSE) or Netty's native one, configured through system properties, the
    /// keystore and the SslContext.
    Java,
    Other,
}

impl Server {
    /// How advice names the kind.
    pub fn name(self) -> &'static str {
        match self {
            Server::Nginx => "nginx",
            Server::Node => "Node.js",
            Server::Go => "Go",
            Server::Rustls => "rustls",
            Server::Haproxy => "HAProxy",
            Server::Java => "Java",
            Server::Other => "other programs",
        }
    }

    /// The kind of a program known by its name (its comm), whatever library it uses.
    pub fn of_program(comm: &str) -> Server {
        match comm {
            "nginx" => Server::Nginx,
            "node" => Server::Node,
            "haproxy" => Server::Haproxy,
            "java" => Server::Java,
            _ => Server::Other,
        }
    }
}
