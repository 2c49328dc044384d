//! Where clients are told the door is: the address of this DC in `help.getConfig`, which
//! clients connect to when they (re)open a connection from it. `[mtproto] public_host` and
//! `public_port` name it; without them the listen address does, but only when it names one
//! interface: 0.0.0.0 or [::] is where the door binds, not an address a client can reach, so
//! it is never handed out and the door refuses to open instead.

use std::net::{IpAddr, SocketAddr};

use oxigram_kit::config::MtprotoConfig;

/// The door's address as clients are told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub host: String,
    pub port: u16,
}

/// The address to hand out for a door listening on `listen`, or why there is none.
pub fn advertised(config: &MtprotoConfig, listen: SocketAddr) -> Result<Advertised, String> {
    let port = config.public_port.unwrap_or(listen.port());
    if port == 0 {
        return Err("[mtproto] public_port is 0, which no client can connect to".into());
    }
    let host = match config.public_host.as_deref() {
        Some(host) => {
            let host = host.trim();
            if host.is_empty() || host.contains(char::is_whitespace) {
                return Err(format!("[mtproto] public_host {host:?} is not a host"));
            }
            // An address given in brackets, as in a URL, is the address inside them.
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            if host.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
                return Err(format!(
                    "[mtproto] public_host {host} names every interface, not an address clients can reach"
                ));
            }
            host.to_owned()
        }
        None if listen.ip().is_unspecified() => {
            return Err(format!(
                "[mtproto] listen {listen} binds every interface: set [mtproto] public_host to the address clients reach the door at"
            ));
        }
        None => listen.ip().to_string(),
    };
    Ok(Advertised { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(public_host: Option<&str>, public_port: Option<u16>) -> MtprotoConfig {
        MtprotoConfig {
            public_host: public_host.map(str::to_owned),
            public_port,
            ..MtprotoConfig::default()
        }
    }

    /// A case: the listen address, `public_host` and `public_port`, and what is expected.
    type Case<'a, T> = (&'a str, Option<&'a str>, Option<u16>, T);

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_public_address_wins_and_the_listen_address_stands_in_for_it() {
        // (listen, public_host, public_port) → what clients are told.
        let cases: [Case<(&str, u16)>; 7] = [
            ("127.0.0.1:7443", None, None, ("127.0.0.1", 7443)),
            ("10.1.2.3:7443", None, Some(443), ("10.1.2.3", 443)),
            ("[::1]:7443", None, None, ("::1", 7443)),
            (
                "0.0.0.0:7443",
                Some("203.0.113.10"),
                None,
                ("203.0.113.10", 7443),
            ),
            (
                "[::]:7443",
                Some("chat.example.org"),
                Some(443),
                ("chat.example.org", 443),
            ),
            (
                "0.0.0.0:7443",
                Some(" [2001:db8::7] "),
                None,
                ("2001:db8::7", 7443),
            ),
            (
                "10.1.2.3:7443",
                Some("198.51.100.1"),
                None,
                ("198.51.100.1", 7443),
            ),
        ];
        for (listen, host, port, (want_host, want_port)) in cases {
            let got = advertised(&config(host, port), addr(listen));
            assert_eq!(
                got,
                Ok(Advertised {
                    host: want_host.into(),
                    port: want_port
                }),
                "{listen} {host:?} {port:?}"
            );
        }
    }

    #[test]
    fn an_address_no_client_can_reach_is_refused() {
        // (listen, public_host, public_port) → what the refusal names.
        let cases: [Case<&str>; 8] = [
            ("0.0.0.0:7443", None, None, "public_host"),
            ("[::]:7443", None, None, "public_host"),
            ("0.0.0.0:7443", None, Some(443), "public_host"),
            ("127.0.0.1:7443", Some("0.0.0.0"), None, "every interface"),
            ("127.0.0.1:7443", Some("[::]"), None, "every interface"),
            ("127.0.0.1:7443", Some(""), None, "not a host"),
            ("127.0.0.1:7443", Some("door .example"), None, "not a host"),
            ("127.0.0.1:7443", None, Some(0), "public_port"),
        ];
        for (listen, host, port, names) in cases {
            match advertised(&config(host, port), addr(listen)) {
                Err(why) => assert!(why.contains(names), "{listen} {host:?}: {why}"),
                Ok(got) => panic!("{listen} {host:?} {port:?} was advertised as {got:?}"),
            }
        }
    }

    #[test]
    fn an_unspecified_listen_address_is_never_advertised() {
        let mut advertised_any = 0;
        for listen in ["0.0.0.0:7443", "[::]:7443", "0.0.0.0:0"] {
            for host in [
                None,
                Some("0.0.0.0"),
                Some("::"),
                Some("[::]"),
                Some("10.0.0.9"),
            ] {
                for port in [None, Some(443)] {
                    if let Ok(got) = advertised(&config(host, port), addr(listen)) {
                        let unspecified = got
                            .host
                            .parse::<IpAddr>()
                            .is_ok_and(|ip| ip.is_unspecified());
                        assert!(!unspecified, "{listen} {host:?} advertised {got:?}");
                        assert_eq!(got.host, "10.0.0.9", "{listen} {host:?}");
                        advertised_any += 1;
                    }
                }
            }
        }
        // Only the reachable public host, on every listen address but the port-0 one without
        // a public port.
        assert_eq!(advertised_any, 5);
    }
}
