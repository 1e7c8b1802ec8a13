//! One test per rule of `config::cluster`, each through `BrokerConfig::from_pairs` so that
//! the defaults take part as they do at startup.

use crate::config::{BrokerConfig, ConfigError, QuorumVoter, SecurityProtocol};

fn cfg(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
    BrokerConfig::from_pairs(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

/// The error's text, which must name `key` and contain `needle`.
fn refused(pairs: &[(&str, &str)], key: &str, needle: &str) {
    let err = match cfg(pairs) {
        Err(e) => e.to_string(),
        Ok(c) => panic!("accepted {pairs:?}: {c:?}"),
    };
    assert!(err.contains(key), "{err:?} does not name {key}");
    assert!(err.contains(needle), "{err:?} does not say {needle:?}");
}

/// A combined node of a three-voter cluster, as in Kafka's quickstart.
const COMBINED_3: &[(&str, &str)] = &[
    ("process.roles", "broker,controller"),
    ("node.id", "1"),
    (
        "controller.quorum.voters",
        "1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093",
    ),
    (
        "listeners",
        "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
    ),
    ("advertised.listeners", "PLAINTEXT://127.0.0.1:19092"),
    ("controller.listener.names", "CONTROLLER"),
    (
        "listener.security.protocol.map",
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    ),
];

fn with(
    base: &[(&'static str, &'static str)],
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut v = base.to_vec();
    v.extend_from_slice(extra);
    v
}

#[test]
fn no_configuration_is_a_standalone_combined_node() {
    let c = cfg(&[]).unwrap();
    assert!(c.process_roles.is_combined());
    assert!(c.standalone_quorum);
    assert!(c.quorum_voters.is_empty());
    assert_eq!(c.listeners.len(), 1);
    assert_eq!(c.listeners[0].name, "PLAINTEXT");
    assert_eq!(
        c.listeners[0].security_protocol,
        SecurityProtocol::Plaintext
    );
    assert_eq!((c.listen_host.as_str(), c.listen_port), ("localhost", 9092));
    assert_eq!(
        (c.advertised_host.as_str(), c.advertised_port),
        ("localhost", 9092)
    );
    assert_eq!(c.inter_broker_listener_name, "PLAINTEXT");
    assert!(c.is_sole_voter());
    // The harness's form: one PLAINTEXT listener, nothing else.
    let c = cfg(&[("listeners", "PLAINTEXT://127.0.0.1:4000")]).unwrap();
    assert!(c.standalone_quorum);
    assert_eq!(c.advertised_port, 4000);
}

#[test]
fn kafka_defaults_for_the_quorum_keys() {
    let c = cfg(&[]).unwrap();
    assert_eq!(c.quorum.election_timeout_ms, 1000);
    assert_eq!(c.quorum.fetch_timeout_ms, 2000);
    assert_eq!(c.quorum.election_backoff_max_ms, 1000);
    assert_eq!(c.quorum.request_timeout_ms, 2000);
    assert_eq!(c.broker_session_timeout_ms, 9000);
    assert_eq!(c.broker_heartbeat_interval_ms, 2000);
    assert_eq!(c.metadata_log_max_snapshot_interval_ms, 3_600_000);
    assert_eq!(c.metadata_log_max_record_bytes_between_snapshots, 20 << 20);
    assert_eq!(c.metadata_log_segment_bytes, 1 << 30);
    assert!(!c.unclean_leader_election_enable);
    assert!(c.auto_leader_rebalance_enable);
    assert_eq!(c.leader_imbalance_check_interval_seconds, 300);
    assert_eq!(c.cluster_id, None);
    assert_eq!(
        c.values["listener.security.protocol.map"],
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    );
}

#[test]
fn numeric_quorum_keys_are_checked() {
    refused(
        &[("controller.quorum.election.timeout.ms", "0")],
        "controller.quorum.election.timeout.ms",
        "positive",
    );
    refused(
        &[("broker.session.timeout.ms", "x")],
        "broker.session.timeout.ms",
        "not a number",
    );
    refused(
        &[("unclean.leader.election.enable", "yes")],
        "unclean.leader.election.enable",
        "true or false",
    );
    refused(
        &[("broker.heartbeat.interval.ms", "9000")],
        "broker.heartbeat.interval.ms",
        "less than broker.session.timeout.ms",
    );
    let c = cfg(&[
        ("controller.quorum.fetch.timeout.ms", "500"),
        ("auto.leader.rebalance.enable", "false"),
    ])
    .unwrap();
    assert_eq!(c.quorum.fetch_timeout_ms, 500);
    assert!(!c.auto_leader_rebalance_enable);
}

#[test]
fn process_roles_accepts_broker_controller_or_both() {
    for (v, broker, controller) in [
        ("broker,controller", true, true),
        ("controller, broker", true, true),
        ("controller", false, true),
        ("broker", true, false),
    ] {
        let r = super::parse_process_roles(v).unwrap();
        assert_eq!((r.broker, r.controller), (broker, controller), "{v}");
    }
    refused(
        &[("process.roles", "broker,zookeeper")],
        "process.roles",
        "Unknown process role 'zookeeper' (only 'broker' and 'controller' are allowed roles)",
    );
    refused(
        &[("process.roles", "broker,broker")],
        "process.roles",
        "Duplicate role names found in `process.roles`: [broker, broker]",
    );
    refused(&[("process.roles", "")], "process.roles", "must contain");
    refused(
        &[("process.roles", "Broker")],
        "process.roles",
        "Unknown process role",
    );
}

#[test]
fn node_id_must_not_be_negative() {
    refused(
        &[("node.id", "-1")],
        "node.id",
        "Missing configuration `node.id`",
    );
}

#[test]
fn a_three_voter_combined_node_parses() {
    let c = cfg(COMBINED_3).unwrap();
    assert!(!c.standalone_quorum);
    assert_eq!(
        c.quorum_voters,
        vec![
            QuorumVoter {
                id: 1,
                host: "127.0.0.1".into(),
                port: 19093
            },
            QuorumVoter {
                id: 2,
                host: "127.0.0.1".into(),
                port: 29093
            },
            QuorumVoter {
                id: 3,
                host: "127.0.0.1".into(),
                port: 39093
            },
        ]
    );
    assert_eq!(c.listeners.len(), 2);
    assert!(c.is_controller_listener("CONTROLLER"));
    assert!(!c.is_controller_listener("PLAINTEXT"));
    assert_eq!(
        (c.listen_host.as_str(), c.listen_port),
        ("127.0.0.1", 19092)
    );
    assert_eq!(c.advertised_port, 19092);
    // Runnable without a cluster.id: the voters derive one from their voter set.
    assert_eq!(c.cluster_id, None);
    let c = cfg(&with(
        COMBINED_3,
        &[("cluster.id", "MkU3OEVBNTcwNTJENDM2Qg")],
    ))
    .unwrap();
    assert_eq!(c.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qg"));
}

#[test]
fn a_single_voter_with_a_controller_listener_runs() {
    let c = cfg(&[
        ("controller.quorum.voters", "1@127.0.0.1:9093"),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        ),
        ("controller.listener.names", "CONTROLLER"),
    ])
    .unwrap();
    assert!(!c.standalone_quorum);
    // The default security map gained CONTROLLER:PLAINTEXT, as Kafka's does.
    assert_eq!(
        c.listeners[1].security_protocol,
        SecurityProtocol::Plaintext
    );
    // advertised.listeners unset: clients are told about PLAINTEXT only.
    assert_eq!(c.advertised_port, 9092);
}

#[test]
fn voters_follow_kafkas_parse_rules() {
    let form = "Each entry should be in the form `{id}@{host}:{port}`.";
    for (value, needle) in [
        (
            "1-127.0.0.1:9093",
            "Invalid configuration value for controller.quorum.voters.",
        ),
        (
            "1@2@127.0.0.1:9093",
            "Invalid configuration value for controller.quorum.voters.",
        ),
        (
            "one@127.0.0.1:9093",
            "Failed to parse voter ID as an integer from one",
        ),
        ("1@:9093", "Failed to parse host name from entry 1@:9093"),
        ("1@host!:9093", "Failed to parse host name from entry"),
        (
            "1@127.0.0.1",
            "Failed to parse host name from entry 1@127.0.0.1",
        ),
        (
            "1@127.0.0.1:port",
            "Failed to parse host port from entry 1@127.0.0.1:port",
        ),
        ("1@127.0.0.1:70000", "Failed to parse host port"),
        ("1@a:1,1@b:2", "Voter id 1 appears more than once"),
    ] {
        let err = super::parse_quorum_voters(value).unwrap_err().to_string();
        assert!(err.contains(needle), "{value}: {err}");
        assert!(err.contains("controller.quorum.voters"), "{value}: {err}");
        if needle.starts_with("Failed to parse host") || needle.starts_with("Invalid") {
            assert!(err.contains(form), "{value}: {err}");
        }
    }
    let v = super::parse_quorum_voters(" 1@[::1]:9093 , 2@kafka-2.local:9093 ").unwrap();
    assert_eq!((v[0].host.as_str(), v[0].port), ("::1", 9093));
    assert_eq!(v[1].host, "kafka-2.local");
}

#[test]
fn bootstrap_servers_follow_kafkas_parse_rules() {
    let v = super::parse_bootstrap_servers("127.0.0.1:9093,[::1]:9094").unwrap();
    assert_eq!(v, vec![("127.0.0.1".into(), 9093), ("::1".into(), 9094)]);
    let err = super::parse_bootstrap_servers("127.0.0.1")
        .unwrap_err()
        .to_string();
    assert!(err.contains("Failed to parse host name from 127.0.0.1 for the configuration controller.quorum.bootstrap.servers"), "{err}");
    let err = super::parse_bootstrap_servers("h:x")
        .unwrap_err()
        .to_string();
    assert!(err.contains("Failed to parse host port from h:x"), "{err}");
    // A dynamic quorum is valid for a controller that lists its listener...
    let c = cfg(&[
        ("controller.quorum.bootstrap.servers", "127.0.0.1:9093"),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        ),
        ("controller.listener.names", "CONTROLLER"),
    ])
    .unwrap();
    assert_eq!(c.quorum_bootstrap_servers.len(), 1);
    // ...and runs the quorum driver with its voters from the log (KIP-853).
    assert!(c.is_dynamic_quorum() && !c.is_sole_voter());
}

#[test]
fn a_quorum_needs_voters_or_bootstrap_servers() {
    // Setting controller.listener.names opts into Kafka's rules.
    refused(
        &[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            ),
            ("controller.listener.names", "CONTROLLER"),
        ],
        "controller.quorum.voters",
        "either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers",
    );
    refused(
        &[("process.roles", "broker")],
        "controller.quorum.voters",
        "either controller.quorum.bootstrap.servers",
    );
}

#[test]
fn a_controller_must_be_one_of_the_voters() {
    refused(
        &with(COMBINED_3, &[("node.id", "4")]),
        "controller.quorum.voters",
        "If process.roles contains the 'controller' role, the node id 4 must be included in the set of voters controller.quorum.voters=Set(1, 2, 3)",
    );
}

#[test]
fn a_controller_needs_its_listener_in_listeners() {
    refused(
        &with(COMBINED_3, &[("listeners", "PLAINTEXT://127.0.0.1:19092")]),
        "controller.listener.names",
        "controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role",
    );
    refused(
        &with(
            COMBINED_3,
            &[
                ("controller.listener.names", "CONTROLLER,CONTROLLER2"),
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,CONTROLLER2:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                ),
            ],
        ),
        "controller.listener.names",
        "controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role",
    );
}

#[test]
fn a_dedicated_controller_binds_only_controller_listeners() {
    let controller = with(COMBINED_3, &[("process.roles", "controller")]);
    refused(
        &controller,
        "listeners",
        "The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller",
    );
    let c = cfg(&with(
        &controller,
        &[
            ("listeners", "CONTROLLER://127.0.0.1:19093"),
            ("advertised.listeners", ""),
        ],
    ))
    .unwrap();
    assert!(!c.process_roles.broker);
    assert_eq!(
        (c.listen_host.as_str(), c.listen_port),
        ("127.0.0.1", 19093)
    );
    // Runnable: a voter of a quorum over the network, with no broker role.
    assert!(!c.is_sole_voter());
    // A single dedicated controller serves brokers in other processes: the only voter of
    // its quorum, as a combined lone node is.
    let single = cfg(&with(
        &controller,
        &[
            ("listeners", "CONTROLLER://127.0.0.1:19093"),
            ("advertised.listeners", ""),
            ("controller.quorum.voters", "1@127.0.0.1:19093"),
        ],
    ))
    .unwrap();
    assert!(single.is_sole_voter());
}

#[test]
fn a_dedicated_broker_must_not_bind_the_controller_listener() {
    let broker = with(COMBINED_3, &[("process.roles", "broker"), ("node.id", "4")]);
    refused(
        &broker,
        "controller.listener.names",
        "controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role",
    );
    let ok = with(
        &broker,
        &[
            ("listeners", "PLAINTEXT://127.0.0.1:49092"),
            ("advertised.listeners", ""),
        ],
    );
    let c = cfg(&ok).unwrap();
    assert!(c.process_roles.broker && !c.process_roles.controller);
    // Runnable: an observer of the controllers' quorum.
    assert!(!c.is_sole_voter());
    refused(
        &with(&ok, &[("node.id", "2")]),
        "controller.quorum.voters",
        "If process.roles contains just the 'broker' role, the node id 2 must not be included in the set of voters",
    );
    refused(
        &with(&ok, &[("controller.listener.names", "")]),
        "controller.listener.names",
        "controller.listener.names must contain at least one value when running KRaft with just the broker role",
    );
    refused(
        &with(
            &ok,
            &[("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")],
        ),
        "controller.listener.names",
        "Controller listener with name CONTROLLER defined in controller.listener.names not found in listener.security.protocol.map",
    );
}

#[test]
fn advertised_listeners_never_include_the_controller_listener() {
    refused(
        &with(
            COMBINED_3,
            &[(
                "advertised.listeners",
                "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            )],
        ),
        "advertised.listeners",
        "The advertised.listeners config must not contain KRaft controller listeners from controller.listener.names when process.roles contains the broker role",
    );
    refused(
        &with(COMBINED_3, &[("advertised.listeners", "CLIENT://h:1")]),
        "advertised.listeners",
        "No security protocol defined for listener CLIENT",
    );
    refused(
        &with(
            COMBINED_3,
            &[
                ("advertised.listeners", "PLAINTEXT://h:1,OTHER://h:2"),
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
                ),
            ],
        ),
        "advertised.listeners",
        "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners",
    );
    refused(
        &with(
            COMBINED_3,
            &[("advertised.listeners", "PLAINTEXT://0.0.0.0:19092")],
        ),
        "advertised.listeners",
        "cannot use the nonroutable meta-address 0.0.0.0",
    );
    refused(
        &with(
            COMBINED_3,
            &[
                ("listeners", "CONTROLLER://127.0.0.1:19093"),
                ("advertised.listeners", ""),
            ],
        ),
        "advertised.listeners",
        "There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?",
    );
}

#[test]
fn listeners_follow_kafkas_parse_rules() {
    for (value, needle) in [
        (
            "localhost:9092",
            "Unable to parse localhost:9092 to a broker endpoint",
        ),
        ("PLAINTEXT://h", "Unable to parse PLAINTEXT://h"),
        ("PLAINTEXT://h:99999", "Unable to parse"),
        (
            "PLAINTEXT://h:1,PLAINTEXT://h:2",
            "Each listener must have a different name",
        ),
        (
            "PLAINTEXT://h:1,SSL://h:1",
            "Each listener must have a different port",
        ),
        (
            "CLIENT://h:1",
            "No security protocol defined for listener CLIENT",
        ),
    ] {
        refused(&[("listeners", value)], "listeners", needle);
    }
    // Names are case-insensitive and normalised, hosts may be empty or bracketed IPv6.
    let c = cfg(&[("listeners", "plaintext://:9092")]).unwrap();
    assert_eq!(c.listeners[0].name, "PLAINTEXT");
    assert_eq!(c.listen_host, "");
    assert_eq!(c.advertised_host, "localhost");
    let c = cfg(&[("listeners", "PLAINTEXT://[::1]:9092")]).unwrap();
    assert_eq!(c.listen_host, "::1");
    let c = cfg(&[("listeners", "PLAINTEXT://0.0.0.0:9092")]).unwrap();
    assert_eq!(c.advertised_host, "localhost");
}

#[test]
fn every_listener_may_be_secured() {
    // Every protocol on a client listener.
    let c = cfg(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095",
        ),
    ])
    .unwrap();
    let protocols: Vec<_> = c.listeners.iter().map(|e| e.security_protocol).collect();
    assert_eq!(
        protocols,
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl
        ]
    );
    // A node alone may make its only listener the inter-broker one.
    cfg(&[
        ("listeners", "CLIENT://127.0.0.1:9093"),
        ("listener.security.protocol.map", "CLIENT:SASL_SSL"),
        ("inter.broker.listener.name", "CLIENT"),
    ])
    .unwrap();
    // Kafka's rule: the inter-broker listener must exist.
    refused(
        &[("listeners", "SSL://127.0.0.1:9093")],
        "inter.broker.listener.name",
        "must be a listener name defined in advertised.listeners",
    );
    // Between the nodes of a cluster too, with the map kept for the routes to them.
    let c = cfg(&with(
        COMBINED_3,
        &[
            (
                "listeners",
                "CLIENT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            ),
            ("advertised.listeners", "CLIENT://127.0.0.1:19092"),
            (
                "listener.security.protocol.map",
                "CLIENT:SASL_SSL,CONTROLLER:SSL",
            ),
            ("inter.broker.listener.name", "CLIENT"),
        ],
    ))
    .unwrap();
    assert_eq!(
        c.listener_protocols,
        [
            ("CLIENT".to_owned(), SecurityProtocol::SaslSsl),
            ("CONTROLLER".to_owned(), SecurityProtocol::Ssl)
        ]
    );
    refused(
        &[("listener.security.protocol.map", "PLAINTEXT:TLS")],
        "listener.security.protocol.map",
        "Invalid security protocol `TLS` defined in listener.security.protocol.map",
    );
    refused(
        &[("listener.security.protocol.map", "PLAINTEXT")],
        "listener.security.protocol.map",
        "not of the form NAME:PROTOCOL",
    );
    // A custom listener name mapped to PLAINTEXT is fine.
    let c = cfg(&[
        ("listeners", "CLIENT://127.0.0.1:9092"),
        ("listener.security.protocol.map", "CLIENT:PLAINTEXT"),
        ("inter.broker.listener.name", "CLIENT"),
    ])
    .unwrap();
    assert_eq!(c.inter_broker_listener_name, "CLIENT");
}

#[test]
fn an_explicit_map_must_name_the_controller_listener() {
    refused(
        &with(
            COMBINED_3,
            &[("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")],
        ),
        "listeners",
        "No security protocol defined for listener CONTROLLER",
    );
}

#[test]
fn inter_broker_listener_must_be_advertised() {
    refused(
        &[
            ("listeners", "CLIENT://127.0.0.1:9092"),
            ("listener.security.protocol.map", "CLIENT:PLAINTEXT"),
            ("inter.broker.listener.name", "internal"),
        ],
        "inter.broker.listener.name",
        "Listener with name INTERNAL defined in inter.broker.listener.name not found in listener.security.protocol.map",
    );
    refused(
        &[
            ("listeners", "CLIENT://127.0.0.1:9092"),
            (
                "listener.security.protocol.map",
                "CLIENT:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            ),
        ],
        "inter.broker.listener.name",
        "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are CLIENT",
    );
}

#[test]
fn cluster_id_is_optional_and_checked() {
    let c = cfg(&[("cluster.id", "MkU3OEVBNTcwNTJENDM2Qg")]).unwrap();
    assert_eq!(c.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qg"));
    for bad in ["short", "MkU3OEVBNTcwNTJENDM2Q=", "MkU3OEVBNTcwNTJENDM2Qh"] {
        refused(&[("cluster.id", bad)], "cluster.id", "22-character");
    }
}

/// The example configurations the README starts clusters from parse, pass Kafka's checks
/// and are runnable, with the roles and voters they say.
#[test]
fn the_shipped_cluster_configs_are_runnable() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    let load = |name: &str| {
        let path = dir.join(name).display().to_string();
        let c = BrokerConfig::from_args(&[path], &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!c.is_sole_voter(), "{name}");
        assert_eq!(c.quorum_voters.len(), 3, "{name}");
        c
    };
    for n in 1..=3 {
        let c = load(&format!("cluster/node{n}.properties"));
        assert!(c.process_roles.is_combined());
        assert_eq!(c.node_id, n);
        let c = load(&format!("dedicated/controller{n}.properties"));
        assert!(c.process_roles.controller && !c.process_roles.broker);
        assert_eq!(c.node_id, n);
        let c = load(&format!("dedicated/broker{}.properties", n + 3));
        assert!(c.process_roles.broker && !c.process_roles.controller);
        assert_eq!(c.node_id, n + 3);
        // The dynamic quorum's nodes: no voters, three bootstrap servers, auto-join.
        let path = dir.join(format!("dynamic/node{n}.properties"));
        let c = BrokerConfig::from_args(&[path.display().to_string()], &[]).unwrap();
        assert!(c.is_dynamic_quorum() && !c.is_sole_voter() && c.quorum_auto_join);
        assert_eq!(c.quorum_bootstrap_servers.len(), 3);
        assert_eq!(c.node_id, n);
    }
}
