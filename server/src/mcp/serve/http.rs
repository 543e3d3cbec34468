//! Streamable HTTP on a loopback address: `rmcp`'s `StreamableHttpService` behind a hyper
//! HTTP/1 server, one session per client.
//!
//! A server on loopback is still reachable from any web page the user opens: a page on
//! `evil.example` whose name is made to resolve to 127.0.0.1 (DNS rebinding) talks to it as a
//! same-origin site. So every request's `Host` must be a loopback name or address with the
//! bound port, and its `Origin`, when there is one, a loopback origin; anything else is
//! answered 403 before it reaches the protocol. `rmcp` checks both when told which values are
//! allowed, which is what [`config`] does.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::Server;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "--http {0}: not a loopback address; wright serves MCP over HTTP only on 127.0.0.1, \
         [::1] or localhost (e.g. 127.0.0.1:8765), since its tools edit files and run commands"
    )]
    NotLoopback(String),
    #[error("--http {0}: expected HOST:PORT, e.g. 127.0.0.1:8765")]
    Malformed(String),
    #[error("listening on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
}

/// `address` (`127.0.0.1:8765`, `[::1]:8765`, `localhost:8765`) as a loopback socket
/// address; any other host is refused, names other than `localhost` included (what a name
/// resolves to can change).
pub fn loopback_address(address: &str) -> Result<SocketAddr, HttpError> {
    let trimmed = address.trim();
    if let Ok(parsed) = trimmed.parse::<SocketAddr>() {
        return if parsed.ip().is_loopback() {
            Ok(parsed)
        } else {
            Err(HttpError::NotLoopback(address.to_owned()))
        };
    }
    let Some((host, port)) = trimmed.rsplit_once(':') else {
        return Err(HttpError::Malformed(address.to_owned()));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(HttpError::Malformed(address.to_owned()));
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if host.parse::<IpAddr>().is_ok() || host.starts_with('[') {
        return Err(HttpError::Malformed(address.to_owned()));
    }
    Err(HttpError::NotLoopback(address.to_owned()))
}

/// Listens on `address` (a loopback one, checked again here).
pub async fn bind(address: SocketAddr) -> Result<TcpListener, HttpError> {
    if !address.ip().is_loopback() {
        return Err(HttpError::NotLoopback(address.to_string()));
    }
    TcpListener::bind(address)
        .await
        .map_err(|source| HttpError::Bind { address, source })
}

/// The `Host` and `Origin` values a request to `bound` (a loopback address) may carry: the
/// loopback names and the bound address itself (`127.0.0.2`, say, which rmcp compares as
/// written).
fn config(bound: SocketAddr) -> StreamableHttpServerConfig {
    let port = bound.port();
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "[::1]".to_owned(),
    ];
    let own = match bound.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    if !hosts.contains(&own) {
        hosts.push(own);
    }
    let origins: Vec<String> = ["http", "https"]
        .iter()
        .flat_map(|scheme| hosts.iter().map(move |host| format!("{scheme}://{host}:*")))
        .collect();
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.iter().map(|host| format!("{host}:{port}")))
        // A page served from loopback (any port: the user's own tools, an inspector) may
        // call; a page from anywhere else may not.
        .with_allowed_origins(origins)
}

/// Serves `server` on `listener` until the process ends; each connection on its own task.
pub async fn serve_http(listener: TcpListener, server: Server) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    let service: StreamableHttpService<Server, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config(bound),
    );
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors and the like: the listener itself is still good.
                tracing::warn!("accepting a connection: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(err) = connection.await {
                tracing::debug!("connection from {peer}: {err}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_served() {
        assert_eq!(
            loopback_address("127.0.0.1:8765").unwrap(),
            "127.0.0.1:8765".parse().unwrap()
        );
        assert_eq!(
            loopback_address("[::1]:9").unwrap(),
            "[::1]:9".parse().unwrap()
        );
        assert_eq!(
            loopback_address("localhost:0").unwrap(),
            "127.0.0.1:0".parse().unwrap()
        );
        assert!(loopback_address("127.8.9.10:1").is_ok());
        for refused in ["0.0.0.0:8765", "[::]:1", "192.168.1.2:80", "example.com:80"] {
            assert!(
                matches!(loopback_address(refused), Err(HttpError::NotLoopback(_))),
                "{refused}"
            );
        }
        for malformed in ["127.0.0.1", "localhost", "localhost:port", ""] {
            assert!(loopback_address(malformed).is_err(), "{malformed}");
        }
    }

    #[test]
    fn the_bound_address_is_an_allowed_host_and_origin_besides_the_loopback_names() {
        let other = config("127.8.9.10:8765".parse().unwrap());
        assert_eq!(
            other.allowed_hosts,
            [
                "localhost:8765",
                "127.0.0.1:8765",
                "[::1]:8765",
                "127.8.9.10:8765"
            ]
        );
        assert!(
            other
                .allowed_origins
                .contains(&"http://127.8.9.10:*".to_owned())
        );
        let v6 = config("[::1]:9".parse().unwrap());
        assert_eq!(v6.allowed_hosts, ["localhost:9", "127.0.0.1:9", "[::1]:9"]);
    }
}
