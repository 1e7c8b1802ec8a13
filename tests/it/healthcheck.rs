//! `strata healthcheck` against the real binary: exit 0 when a broker answers ApiVersions,
//! 1 when nothing listens, when the listener never answers (within `--timeout-ms`), and when
//! the answer is not an ApiVersions response. The address comes from `--bootstrap`, or from
//! the configuration the server itself reads (environment, properties file).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use strata_tests::{Broker, run_with_timeout, strata_bin};

/// The bound on one healthcheck run; each check below asks for far less.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

fn healthcheck(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(strata_bin());
    cmd.arg("healthcheck").args(args);
    // The test process's own KAFKA_* / STRATA_* variables must not steer the derived address.
    for (k, _) in std::env::vars() {
        if k.starts_with("KAFKA_") || k.starts_with("STRATA_") || k == "CLUSTER_ID" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    run_with_timeout(&mut cmd, b"", RUN_TIMEOUT).expect("strata healthcheck finishes")
}

fn describe(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_healthy(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("answered ApiVersions"),
        "{}",
        describe(out)
    );
}

fn assert_unhealthy(out: &Output, why: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", describe(out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unhealthy") && stderr.contains(why),
        "expected {why:?}: {}",
        describe(out)
    );
}

#[test]
fn a_running_broker_is_healthy_and_a_stopped_one_is_not() {
    let mut b = Broker::start(&[]).expect("start strata");
    let bootstrap = b.bootstrap();
    assert_healthy(&healthcheck(&["--bootstrap", &bootstrap], &[]));

    // The address the server would listen on, from its environment...
    let listeners = format!("PLAINTEXT://127.0.0.1:{}", b.port());
    assert_healthy(&healthcheck(&[], &[("KAFKA_LISTENERS", &listeners)]));
    // ...or from its properties file, the environment winning as it does for the server.
    let file = b
        .data_dir()
        .parent()
        .unwrap()
        .join("healthcheck.properties");
    std::fs::write(&file, format!("listeners={listeners}\n")).unwrap();
    let file = file.to_str().unwrap();
    assert_healthy(&healthcheck(&[file], &[]));
    let elsewhere = "PLAINTEXT://127.0.0.1:1";
    assert_unhealthy(
        &healthcheck(&[file], &[("STRATA_LISTENERS", elsewhere)]),
        "127.0.0.1:1",
    );

    let status = b.stop().expect("stop strata");
    assert!(status.success(), "{status}");
    assert_unhealthy(
        &healthcheck(&["--bootstrap", &bootstrap, "--timeout-ms", "2000"], &[]),
        "Connection refused",
    );
}

#[test]
fn a_listener_that_never_answers_is_unhealthy_within_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // Accepts, reads the request, and says nothing until the client gives up.
    let holder = thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut sink = [0u8; 256];
        while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
    });
    let started = Instant::now();
    let out = healthcheck(&["--bootstrap", &addr, "--timeout-ms", "1000"], &[]);
    let took = started.elapsed();
    assert_unhealthy(&out, "timed out");
    assert!(
        took < Duration::from_secs(10),
        "a 1000 ms check took {took:?}"
    );
    holder.join().unwrap();
}

#[test]
fn an_answer_that_is_not_api_versions_is_unhealthy() {
    let cases: [(&[u8], &str); 3] = [
        // A size prefix far beyond any ApiVersions response: refused before allocating.
        (&[0x7f, 0xff, 0xff, 0xff], "response size 2147483647"),
        // A well-sized frame whose body is not an ApiVersions response.
        (&[0, 0, 0, 6, 0, 0, 0, 1, 0xff, 0xff], "decode the response"),
        // The connection closes before any answer.
        (&[], "closed"),
    ];
    for (reply, why) in cases {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let reply = reply.to_vec();
        let server = thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            // The whole request, so that closing sends FIN, not a reset for unread bytes.
            let mut size = [0u8; 4];
            conn.read_exact(&mut size).unwrap();
            let mut request = vec![0u8; u32::from_be_bytes(size).min(4096) as usize];
            conn.read_exact(&mut request).unwrap();
            let _ = conn.write_all(&reply);
        });
        let out = healthcheck(&["--bootstrap", &addr, "--timeout-ms", "5000"], &[]);
        assert_unhealthy(&out, why);
        server.join().unwrap();
    }
}
