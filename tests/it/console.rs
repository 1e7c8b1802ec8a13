//! The web console (`console.listener`) of the real `strata` binary, over HTTP, checked
//! against what the Kafka APIs say through the rdkafka crate:
//!
//! - `a_three_node_console_shows_the_cluster_and_acts_through_the_admin_apis`: three nodes,
//!   each with its console. Any node's overview names every broker alive and the quorum's
//!   leader (the controller the cluster agrees on). A topic created from one node's console
//!   has the partitions and replicas it asked for (rdkafka's Metadata); its page shows each
//!   partition's leader and log end offset as Metadata and the watermarks do; the search
//!   finds the one record whose value holds a needle, at its offset, on the partition's
//!   leader from any node; a consumer group's lag falls to what it left unread and its
//!   reset to earliest is what rdkafka then reads as committed; added partitions, an
//!   altered config (marked as not the default), deleted records and a deleted topic are
//!   what the cluster then shows; a node killed with SIGKILL is shown unreachable, then
//!   fenced.
//! - `bad_input_gets_a_clear_error`: malformed and huge numbers, an unknown topic or
//!   partition, an offset past the end, a regular expression that does not parse, and a
//!   pathological one (answered at once: the engine is linear), a write without the
//!   console's header, a body too large or not JSON: each a 4xx with a message, and the
//!   node serves on.
//! - `with_security_on_the_console_needs_a_user_and_shows_what_its_acls_allow`: with an
//!   authorizer, nothing without credentials or with a wrong password (401); a SCRAM user
//!   with no ACLs sees no topic and cannot create one (403, Kafka's error named); with
//!   DESCRIBE on one topic it sees that topic only; a super user sees and does everything.
//! - `read_only_refuses_every_action`: `console.read.only=true` shows the pages without
//!   their forms and answers every write 403.
//! - `an_open_transaction_is_listed_and_an_idle_one_is_hanging`: a transactional producer's
//!   open transaction is listed at its coordinator and on its partition, and is hanging once
//!   idle past the maximum timeout asked for; gone once committed.
//! - `a_kip848_group_shows_its_members_and_their_assignments`: a librdkafka member of a
//!   KIP-848 group (`group.protocol=consumer`): type, state, subscription, and the four
//!   partitions the member itself holds.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, TopicPartitionList};
use serde_json::{Value, json};
use strata_tests::cluster::Cluster;
use strata_tests::{Broker, free_port, serial, wait_until};

use crate::admin_cli_run::admin;
use crate::rdkafka_clients::group::Member;

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// An HTTP client of one console.
struct Console {
    base: String,
    agent: ureq::Agent,
    auth: Option<String>,
}

impl Console {
    fn at(port: u16) -> Console {
        Console {
            base: format!("http://127.0.0.1:{port}"),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(60)))
                .build()
                .into(),
            auth: None,
        }
    }

    fn signed_in(mut self, user: &str, password: &str) -> Console {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.auth = Some(format!("Basic {token}"));
        self
    }

    /// GET `path`: status and body.
    fn get_text(&self, path: &str) -> (u16, String) {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        let mut r = req.call().unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap_or_default())
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.get_text(path);
        let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"));
        (status, v)
    }

    fn ok(&self, path: &str) -> Value {
        let (status, v) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    /// POST (or DELETE with `body` None) as the console's pages send it.
    fn write(&self, method: &str, path: &str, body: Option<&Value>, header: bool) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let mut r = if method == "DELETE" {
            let mut req = self.agent.delete(&url);
            if header {
                req = req.header("X-Strata-Console", "1");
            }
            if let Some(a) = &self.auth {
                req = req.header("Authorization", a);
            }
            req.call()
        } else {
            let mut req = self
                .agent
                .post(&url)
                .header("Content-Type", "application/json");
            if header {
                req = req.header("X-Strata-Console", "1");
            }
            if let Some(a) = &self.auth {
                req = req.header("Authorization", a);
            }
            req.send(body.map_or_else(String::new, Value::to_string))
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        let (status, v) = self.write("POST", path, Some(body), true);
        assert_eq!(status, 200, "POST {path} {body}: {v}");
        v
    }
}

fn producer(bootstrap: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// Produces `values` to `topic`'s `partition` and waits for every acknowledgement.
fn produce(bootstrap: &str, topic: &str, partition: i32, values: &[String]) {
    let p = producer(bootstrap);
    for v in values {
        loop {
            match p.send(
                BaseRecord::<(), _>::to(topic)
                    .partition(partition)
                    .payload(v),
            ) {
                Ok(()) => break,
                Err((e, _)) => {
                    assert!(format!("{e}").contains("Queue full"), "send: {e}");
                    p.poll(Duration::from_millis(10));
                }
            }
        }
    }
    p.flush(WAIT).expect("flush");
}

fn partitions_of(bootstrap: &str, topic: &str) -> BTreeMap<i32, (i32, usize)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("client");
    let m = c.fetch_metadata(Some(topic), WAIT).expect("metadata");
    m.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), (p.leader(), p.replicas().len())))
        .collect()
}

#[test]
fn a_three_node_console_shows_the_cluster_and_acts_through_the_admin_apis() {
    const TOPIC: &str = "console-made";
    const GROUP: &str = "console-group";
    let _serial = serial();
    let ports: BTreeMap<i32, u16> = (1..=3).map(|id| (id, free_port().unwrap())).collect();
    let mut c =
        Cluster::start_with_node_settings(3, &[("offsets.topic.num.partitions", "3")], |id| {
            vec![(
                "console.listener".to_owned(),
                format!("http://127.0.0.1:{}", ports[&id]),
            )]
        });
    let controller = c.wait_ready(WAIT);
    let all = c.ids();
    let bootstrap = c.bootstrap(&all);
    let console = |id: i32| Console::at(ports[&id]);

    // Any node shows every broker and the quorum.
    let mut overview = Value::Null;
    wait_until("every broker alive in the overview", WAIT, POLL, || {
        overview = console(2).ok("/api/overview");
        Ok(overview["brokers"]
            .as_array()
            .is_some_and(|b| b.len() == 3 && b.iter().all(|x| x["alive"] == true)))
    })
    .unwrap_or_else(|e| panic!("{e:?}: {overview}"));
    assert_eq!(
        overview["quorum"]["leader"],
        json!(controller),
        "{overview}"
    );
    assert_eq!(
        overview["quorum"]["voters"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(overview["controller_id"], json!(controller));

    // Create from node 3's console; the cluster agrees.
    let created = console(3).post(
        "/api/topics",
        &json!({"name": TOPIC, "partitions": 3, "replication_factor": 3}),
    );
    assert_eq!(created["partitions"], 3, "{created}");
    let mut meta = BTreeMap::new();
    wait_until("the topic's leaders", WAIT, POLL, || {
        meta = partitions_of(&bootstrap, TOPIC);
        Ok(meta.len() == 3 && meta.values().all(|(l, r)| *l >= 0 && *r == 3))
    })
    .unwrap_or_else(|e| panic!("{e:?}: {meta:?}"));
    let (status, again) = console(1).write(
        "POST",
        "/api/topics",
        Some(&json!({"name": TOPIC, "partitions": 1})),
        true,
    );
    assert_eq!(status, 400, "{again}");
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("TOPIC_ALREADY_EXISTS"),
        "{again}"
    );

    // Records, one of them a needle on partition 1.
    let values: Vec<String> = (0..200)
        .map(|i| {
            if i == 137 {
                "hay needle-42 hay".to_owned()
            } else {
                format!("hay-{i}")
            }
        })
        .collect();
    produce(&bootstrap, TOPIC, 1, &values);
    produce(&bootstrap, TOPIC, 0, &values[..50]);

    // The topic page agrees with Metadata and the watermarks, from a node that may not lead.
    let page = console(1).ok(&format!("/api/topics/{TOPIC}"));
    let watermarks: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    for p in page["partitions"].as_array().unwrap() {
        let id = i32::try_from(p["partition"].as_i64().unwrap()).unwrap();
        assert_eq!(p["leader"], json!(meta[&id].0), "partition {id}: {page}");
        let (_, high) = watermarks
            .fetch_watermarks(TOPIC, id, WAIT)
            .expect("watermarks");
        assert_eq!(p["log_end_offset"], json!(high), "partition {id}");
        assert_eq!(p["replicas"].as_array().unwrap().len(), 3);
    }
    let configs = page["configs"].as_array().expect("configs");
    assert!(
        configs
            .iter()
            .any(|e| e["name"] == "retention.ms" && e["default"] == true),
        "{page}"
    );

    // The search finds the needle from every node, and reports its scan.
    for id in &all {
        let found = console(*id).ok(&format!(
            "/api/search?topic={TOPIC}&partition=1&value=needle-42"
        ));
        let matches = found["matches"].as_array().unwrap();
        assert_eq!(matches.len(), 1, "node {id}: {found}");
        assert_eq!(matches[0]["offset"], 137);
        assert_eq!(matches[0]["value"]["text"], "hay needle-42 hay");
        assert_eq!(found["done"], true);
        assert_eq!(found["scanned_records"], 200);
    }
    let by_regex = console(2).ok(&format!(
        "/api/search?topic={TOPIC}&partition=1&regex=needle-%5Cd%2B"
    ));
    assert_eq!(
        by_regex["matches"].as_array().unwrap().len(),
        1,
        "{by_regex}"
    );
    let browse = console(2).ok(&format!(
        "/api/messages?topic={TOPIC}&partition=1&offset=130&limit=10&format=hex"
    ));
    let records = browse["records"].as_array().unwrap();
    assert_eq!(records.len(), 10);
    assert_eq!(records[0]["offset"], 130);
    assert_eq!(records[0]["value"]["as"], "hex");

    // A group that read 120 of partition 1's 200 records and left: lag 80, as rdkafka sees it.
    {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", GROUP)
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(TOPIC, 1, rdkafka::Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let mut read = 0;
        let mut last = -1;
        while read < 120 {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) {
                read += 1;
                last = m.offset();
            }
        }
        let mut commit = TopicPartitionList::new();
        commit
            .add_partition_offset(TOPIC, 1, rdkafka::Offset::Offset(last + 1))
            .unwrap();
        consumer.commit(&commit, CommitMode::Sync).expect("commit");
    }
    let group = console(3).ok(&format!("/api/groups/{GROUP}"));
    assert_eq!(group["total_lag"], 80, "{group}");
    assert_eq!(group["state"], "Empty", "{group}");
    let listed = console(1).ok("/api/groups");
    assert!(
        listed["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["group_id"] == GROUP),
        "{listed}"
    );
    let reset = console(2).post(
        &format!("/api/groups/{GROUP}/reset-offsets"),
        &json!({"to": "earliest"}),
    );
    assert_eq!(reset["reset"][0]["offset"], 0, "{reset}");
    let checker: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", GROUP)
        .create()
        .unwrap();
    let mut asked = TopicPartitionList::new();
    asked.add_partition(TOPIC, 1);
    let committed = checker.committed_offsets(asked, WAIT).expect("committed");
    assert_eq!(
        committed.find_partition(TOPIC, 1).map(|p| p.offset()),
        Some(rdkafka::Offset::Offset(0))
    );
    assert_eq!(
        console(1).ok(&format!("/api/groups/{GROUP}"))["total_lag"],
        200
    );

    // Partitions, a config, records, and the topic itself.
    console(1).post(
        &format!("/api/topics/{TOPIC}/partitions"),
        &json!({"count": 5}),
    );
    wait_until("five partitions", WAIT, POLL, || {
        Ok(partitions_of(&bootstrap, TOPIC).len() == 5)
    })
    .unwrap();
    console(2).post(
        &format!("/api/topics/{TOPIC}/configs"),
        &json!({"name": "retention.ms", "value": "3600000"}),
    );
    // Node 3 shows it once it has applied the change node 2's write committed.
    let mut retention = Value::Null;
    wait_until("the new retention on node 3", WAIT, POLL, || {
        let set = console(3).ok(&format!("/api/topics/{TOPIC}"));
        retention = set["configs"]
            .as_array()
            .and_then(|c| c.iter().find(|e| e["name"] == "retention.ms"))
            .cloned()
            .unwrap_or(Value::Null);
        Ok(retention["value"] == "3600000")
    })
    .unwrap_or_else(|e| panic!("{e:?}: {retention}"));
    assert_eq!(retention["default"], false);
    let deleted = console(3).post(
        &format!("/api/topics/{TOPIC}/delete-records"),
        &json!({"partition": 1, "offset": 100}),
    );
    assert_eq!(deleted["low_watermark"], 100, "{deleted}");
    let (low, _) = watermarks.fetch_watermarks(TOPIC, 1, WAIT).unwrap();
    assert_eq!(low, 100);
    let (status, gone) = console(1).write("DELETE", &format!("/api/topics/{TOPIC}"), None, true);
    assert_eq!(status, 200, "{gone}");
    wait_until("the topic gone", WAIT, POLL, || {
        Ok(console(2).get(&format!("/api/topics/{TOPIC}")).0 == 404)
    })
    .unwrap();

    // Every page renders, from a node that is not the controller.
    let other = all.iter().copied().find(|&i| i != controller).unwrap();
    for page in [
        "/",
        "/topics",
        "/groups",
        &format!("/groups/{GROUP}"),
        "/hot",
        "/messages",
        "/transactions",
        "/security",
    ] {
        let (status, html) = console(other).get_text(page);
        assert_eq!(status, 200, "{page}: {html}");
        assert!(html.contains("<main>"), "{page}");
    }

    // A node killed with SIGKILL: the others' overviews show it unreachable at once, and
    // fenced once its session times out.
    let victim = all
        .iter()
        .copied()
        .find(|&i| i != controller && i != other)
        .unwrap();
    c.node(victim).kill9();
    let mut seen = Value::Null;
    wait_until("the killed node unreachable and fenced", WAIT, POLL, || {
        seen = console(other).ok("/api/overview");
        Ok(seen["brokers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["id"] == json!(victim) && b["alive"] == false && b["fenced"] == true))
    })
    .unwrap_or_else(|e| panic!("{e:?}: {seen}"));
    assert_eq!(
        seen["brokers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["alive"] == true)
            .count(),
        2,
        "{seen}"
    );
    drop(c);
}

#[test]
fn bad_input_gets_a_clear_error() {
    let port = free_port().unwrap();
    let b = Broker::start(&[("console.listener", &format!("http://127.0.0.1:{port}"))]).unwrap();
    let console = Console::at(port);
    wait_until("the console", WAIT, POLL, || {
        Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
    })
    .unwrap();
    produce(&b.bootstrap(), "bad-input", 0, &["x".repeat(5000)]);
    let cases = [
        (
            "/api/messages?topic=bad-input&partition=abc",
            400,
            "partition",
        ),
        (
            "/api/messages?topic=bad-input&offset=99999999999999999999999",
            400,
            "offset",
        ),
        ("/api/messages?topic=bad-input&offset=-5", 400, "offset"),
        (
            "/api/messages?topic=bad-input&offset=1000000",
            400,
            "past the log's end",
        ),
        (
            "/api/messages?topic=bad-input&partition=7",
            404,
            "no partition 7",
        ),
        (
            "/api/messages?topic=no-such-topic",
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        ("/api/messages", 400, "topic is required"),
        ("/api/messages?topic=bad-input&limit=100000", 400, "limit"),
        ("/api/messages?topic=bad-input&format=ebcdic", 400, "format"),
        ("/api/search?topic=bad-input&regex=(", 400, "regex"),
        (
            "/api/search?topic=bad-input&regex=a%7B1000%7D%7B1000%7D",
            400,
            "regex",
        ),
        ("/api/search?topic=bad-input&max_bytes=0", 400, "max_bytes"),
        (
            "/api/search?topic=bad-input&max_ms=999999999",
            400,
            "max_ms",
        ),
        ("/api/topics?size=0", 400, "size"),
        (
            "/api/topics/no-such-topic",
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        ("/api/hot?factor=0.5", 400, "factor"),
        ("/api/nothing-here", 404, ""),
    ];
    for (path, status, says) in cases {
        let (got, v) = console.get(path);
        assert_eq!(got, status, "{path}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains(says)),
            "{path}: {v}"
        );
    }
    // A pathological pattern for a backtracking engine is linear here: answered at once.
    let started = std::time::Instant::now();
    let slow = console.ok("/api/search?topic=bad-input&regex=%5E(x%2B)%2By%24");
    assert_eq!(slow["matches"].as_array().unwrap().len(), 0);
    println!(
        "measured: a (x+)+y search over a 5,000-byte value took {} ms",
        started.elapsed().as_millis()
    );
    // Writes: the console's header, a JSON body of bounded size, an existing action.
    let (status, v) = console.write("POST", "/api/topics", Some(&json!({"name": "x"})), false);
    assert_eq!(status, 403, "{v}");
    let huge = json!({"name": "y".repeat(100_000)});
    let (status, _) = console.write("POST", "/api/topics", Some(&huge), true);
    assert_eq!(status, 413);
    let (status, v) = console.write("POST", "/api/topics", None, true);
    assert_eq!(status, 400, "{v}");
    let (status, v) = console.write(
        "POST",
        "/api/topics",
        Some(&json!({"name": "z", "partitions": "many"})),
        true,
    );
    assert_eq!(
        (status, v["error"].as_str().unwrap().contains("partitions")),
        (400, true),
        "{v}"
    );
    let (status, v) = console.write(
        "POST",
        "/api/topics/bad-input/explode",
        Some(&json!({})),
        true,
    );
    assert_eq!(status, 404, "{v}");
    // A request head that is garbage closes only that connection.
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"\x00\x01garbage\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let _ = s.read_to_end(&mut buf);
        assert!(
            buf.is_empty() || String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 400"),
            "{buf:?}"
        );
    }
    assert_eq!(console.ok("/api/overview")["node_id"], 1);
    drop(b);
}

#[test]
fn with_security_on_the_console_needs_a_user_and_shows_what_its_acls_allow() {
    let port = free_port().unwrap();
    let b = Broker::start(&[
        ("console.listener", &format!("http://127.0.0.1:{port}")),
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        // The admin tool (and the node's own connections) come in as ANONYMOUS on PLAINTEXT.
        ("super.users", "User:ANONYMOUS;User:admin"),
    ])
    .unwrap();
    for (user, password) in [("admin", "admin-secret"), ("alice", "alice-secret")] {
        let run = admin(
            &b.bootstrap(),
            &["users", "add", "--user", user, "--password", password],
        );
        assert!(run.ok, "{run:?}");
    }
    let run = admin(
        &b.bootstrap(),
        &["topics", "create", "--topic", "secret", "--partitions", "1"],
    );
    assert!(run.ok, "{run:?}");
    let run = admin(
        &b.bootstrap(),
        &["topics", "create", "--topic", "open", "--partitions", "1"],
    );
    assert!(run.ok, "{run:?}");
    wait_until("the console", WAIT, POLL, || {
        Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
    })
    .unwrap();
    let anonymous = Console::at(port);
    for path in [
        "/",
        "/api/overview",
        "/api/topics",
        "/topics/secret",
        "/api/messages?topic=secret",
    ] {
        assert_eq!(anonymous.get_text(path).0, 401, "{path}");
    }
    let (status, _) = anonymous.write(
        "POST",
        "/api/topics",
        Some(&json!({"name": "sneaky"})),
        true,
    );
    assert_eq!(status, 401);
    assert_eq!(
        Console::at(port)
            .signed_in("alice", "wrong")
            .get_text("/api/topics")
            .0,
        401
    );
    assert_eq!(
        Console::at(port)
            .signed_in("mallory", "x")
            .get_text("/api/topics")
            .0,
        401
    );

    let alice = Console::at(port).signed_in("alice", "alice-secret");
    let names = |c: &Console| -> Vec<String> {
        c.ok("/api/topics")["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names(&alice).is_empty(), "{:?}", names(&alice));
    assert_eq!(alice.get("/api/topics/secret").0, 403);
    let (status, v) = alice.write(
        "POST",
        "/api/topics",
        Some(&json!({"name": "alices"})),
        true,
    );
    assert_eq!(status, 403, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("AUTHORIZATION_FAILED"),
        "{v}"
    );
    let run = admin(
        &b.bootstrap(),
        &[
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Describe",
            "--topic",
            "open",
        ],
    );
    assert!(run.ok, "{run:?}");
    wait_until("alice sees the topic she may describe", WAIT, POLL, || {
        Ok(names(&alice) == ["open"])
    })
    .unwrap();
    assert_eq!(alice.get("/api/topics/secret").0, 403);

    let admin_user = Console::at(port).signed_in("admin", "admin-secret");
    let all = names(&admin_user);
    assert!(
        all.contains(&"secret".to_owned()) && all.contains(&"open".to_owned()),
        "{all:?}"
    );
    admin_user.post("/api/topics", &json!({"name": "admins", "partitions": 2}));
    assert!(names(&admin_user).contains(&"admins".to_owned()));
    assert_eq!(admin_user.ok("/api/overview")["principal"], "User:admin");
    drop(b);
}

#[test]
fn read_only_refuses_every_action() {
    let port = free_port().unwrap();
    let b = Broker::start(&[
        ("console.listener", &format!("http://127.0.0.1:{port}")),
        ("console.read.only", "true"),
    ])
    .unwrap();
    produce(&b.bootstrap(), "ro", 0, &["a".to_owned()]);
    wait_until("the console", WAIT, POLL, || {
        Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
    })
    .unwrap();
    let console = Console::at(port);
    for (method, path, body) in [
        ("POST", "/api/topics", Some(json!({"name": "n"}))),
        ("DELETE", "/api/topics/ro", None),
        (
            "POST",
            "/api/topics/ro/partitions",
            Some(json!({"count": 3})),
        ),
        (
            "POST",
            "/api/topics/ro/configs",
            Some(json!({"name": "retention.ms", "value": "1"})),
        ),
        (
            "POST",
            "/api/topics/ro/delete-records",
            Some(json!({"partition": 0, "offset": -1})),
        ),
        (
            "POST",
            "/api/groups/g/reset-offsets",
            Some(json!({"to": "earliest"})),
        ),
    ] {
        let (status, v) = console.write(method, path, body.as_ref(), true);
        assert_eq!(status, 403, "{method} {path}: {v}");
        assert!(v["error"].as_str().unwrap().contains("read-only"), "{v}");
    }
    let (status, html) = console.get_text("/topics/ro");
    assert_eq!(status, 200);
    assert!(
        !html.contains("class=\"action"),
        "a form on a read-only page"
    );
    assert_eq!(partitions_of(&b.bootstrap(), "ro").len(), 1);
    drop(b);
}

#[test]
fn an_open_transaction_is_listed_and_an_idle_one_is_hanging() {
    let port = free_port().unwrap();
    let b = Broker::start(&[("console.listener", &format!("http://127.0.0.1:{port}"))]).unwrap();
    wait_until("the console", WAIT, POLL, || {
        Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
    })
    .unwrap();
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("transactional.id", "console-open")
        .create()
        .expect("producer");
    p.init_transactions(WAIT).expect("init");
    p.begin_transaction().expect("begin");
    p.send(
        BaseRecord::<(), _>::to("txn-open")
            .partition(0)
            .payload("in flight"),
    )
    .expect("send");
    p.flush(WAIT).expect("flush");
    let console = Console::at(port);
    let v = console.ok("/api/transactions");
    let listed = v["transactions"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|t| t["transactional_id"] == "console-open" && t["state"] == "Ongoing"),
        "{v}"
    );
    let open = v["open_on_partitions"].as_array().unwrap();
    assert_eq!(open.len(), 1, "{v}");
    assert_eq!(open[0]["topic"], "txn-open");
    assert_eq!(open[0]["start_offset"], 0);
    assert_eq!(open[0]["hanging"], false, "{v}");
    // Idle past a (here tiny) maximum timeout: hanging.
    std::thread::sleep(Duration::from_millis(50));
    let v = console.ok("/api/transactions?max_timeout_ms=10");
    assert_eq!(v["open_on_partitions"][0]["hanging"], true, "{v}");
    p.commit_transaction(WAIT).expect("commit");
    wait_until("no transaction open once committed", WAIT, POLL, || {
        Ok(console.ok("/api/transactions")["open_on_partitions"]
            .as_array()
            .is_some_and(Vec::is_empty))
    })
    .unwrap();
    let (status, html) = console.get_text("/transactions");
    assert_eq!(status, 200);
    assert!(html.contains("open-transactions"));
    drop(b);
}

#[test]
fn a_kip848_group_shows_its_members_and_their_assignments() {
    let port = free_port().unwrap();
    let b = Broker::start(&[("console.listener", &format!("http://127.0.0.1:{port}"))]).unwrap();
    wait_until("the console", WAIT, POLL, || {
        Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
    })
    .unwrap();
    let console = Console::at(port);
    console.post("/api/topics", &json!({"name": "kip848", "partitions": 4}));
    produce(
        &b.bootstrap(),
        "kip848",
        0,
        &(0..30).map(|i| format!("r{i}")).collect::<Vec<_>>(),
    );
    // The suite's group member, whose context serves librdkafka's rebalance callbacks.
    let mut member = Member::join(
        &b.bootstrap(),
        "console-848",
        "m1",
        "kip848",
        4,
        &[("group.protocol", "consumer")],
    )
    .expect("member");
    let mut group = Value::Null;
    wait_until("the member holds all four partitions", WAIT, POLL, || {
        member.poll_once()?;
        group = console.ok("/api/groups/console-848");
        Ok(group["members"][0]["assignment"]
            .as_array()
            .is_some_and(|a| a.len() == 4))
    })
    .unwrap_or_else(|e| panic!("{e:?}: {group}"));
    assert_eq!(group["type"], "consumer", "{group}");
    assert_eq!(group["state"], "Stable", "{group}");
    assert_eq!(group["members"].as_array().unwrap().len(), 1);
    assert_eq!(group["members"][0]["subscribed"], json!(["kip848"]));
    assert_eq!(member.partitions().len(), 4, "the member's own view");
    let (status, html) = console.get_text("/groups/console-848");
    assert_eq!(status, 200);
    assert!(
        html.contains("kip848:0"),
        "the member's assignment on the page"
    );
    drop(member);
    drop(b);
}
