//! Waiting for `GET /health` with plain std networking (no HTTP client crate).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One probe: true when the server answers 200 with `"status": "ok"`.
pub fn health_ok(host_port: &str, key: &str) -> bool {
    let Some(addr) = host_port.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!(
        "GET /health HTTP/1.1\r\nHost: {host_port}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = stream.take(1 << 20).read_to_end(&mut response);
    is_healthy(&String::from_utf8_lossy(&response))
}

/// A raw HTTP response that says the server is up.
pub fn is_healthy(response: &str) -> bool {
    let status_ok = response.lines().next().is_some_and(|l| l.split_whitespace().nth(1) == Some("200"));
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    status_ok && compact.contains("\"status\":\"ok\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_200_with_status_ok_is_healthy() {
        assert!(is_healthy("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"status\": \"ok\", \"model\": \"m\"}"));
        assert!(!is_healthy("HTTP/1.1 200 OK\r\n\r\n{\"status\": \"loading\"}"));
        assert!(!is_healthy("HTTP/1.1 503 Service Unavailable\r\n\r\n{\"status\": \"ok\"}"));
        assert!(!is_healthy(""));
    }

    #[test]
    fn nothing_listening_is_not_healthy() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        assert!(!health_ok(&format!("127.0.0.1:{port}"), "k"));
    }
}
