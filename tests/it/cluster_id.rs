//! `cluster.id`: an empty data directory is formatted with the configured id on first start
//! (no separate format step), and a node whose data directory belongs to another cluster
//! refuses to start, as Kafka does.

use std::process::{Command, Stdio};
use std::time::Duration;

use strata_tests::{Broker, free_port, strata_bin, wait_until};

const ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";
const OTHER: &str = "J8aAPcfLQt2bqs1JT_rMgQ";

#[test]
fn the_configured_cluster_id_formats_and_guards_the_data_directory() {
    let mut b = Broker::start(&[("cluster.id", ID)]).expect("start");
    // The broker binds its listener before it formats the data directory, so the file can
    // come a moment after the port first accepts (seen with other tests loading the machine).
    let path = b.data_dir().join("meta.properties");
    let mut meta = String::new();
    let formatted = wait_until(
        "meta.properties is written",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || {
            meta = std::fs::read_to_string(&path).unwrap_or_default();
            Ok(meta.contains(&format!("cluster.id={ID}")))
        },
    );
    assert!(formatted.is_ok(), "{formatted:?}: {meta}");
    let status = b.stop().expect("stop");
    assert!(status.success(), "{status}");

    let run = |id: &str| {
        let port = free_port().unwrap();
        let out = Command::new(strata_bin())
            .args([
                "--override".to_owned(),
                format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
                "--override".to_owned(),
                format!("log.dirs={}", b.data_dir().display()),
                "--override".to_owned(),
                format!("cluster.id={id}"),
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run strata");
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, stderr) = run(OTHER);
    assert!(
        !status.success(),
        "started with another cluster's data:\n{stderr}"
    );
    assert!(
        stderr.contains("Invalid cluster.id in: ")
            && stderr.contains(&format!("Expected {OTHER}, but read {ID}")),
        "{stderr}"
    );
    let meta = std::fs::read_to_string(b.data_dir().join("meta.properties")).unwrap();
    assert!(
        meta.contains(&format!("cluster.id={ID}")),
        "untouched: {meta}"
    );
}
