//! # Whole-system tests
//!
//! Real clients (librdkafka through the `rdkafka` crate, kcat, hand-built frames) against
//! the real `strata` binary. They are one test binary, so librdkafka is linked once and the
//! tests of every area share libtest's threads; the harness they drive (one broker, a
//! cluster, raw frames) is the `strata_tests` library in `tests/src`.
//!
//! ## Layout
//!
//! - Client-side helpers, shared by the modules below: [`admin_client`] (the rdkafka admin
//!   client), [`acl_client`] (ACL requests encoded by the protocol crate), [`admin_cli_run`]
//!   (`strata admin` as a child process), [`cluster_clients`] (librdkafka against a
//!   cluster), [`metrics_scrape`] (the metrics endpoint over HTTP) and [`rdkafka_clients`]
//!   (producers, consumers, groups and a member in a process of its own).
//! - One module per area, each with its tests and a `//!` saying what they show. A test's
//!   name is its module path: `cargo test --release -p strata-tests cluster_failover::`
//!   runs one area.
//!
//! ## Running together
//!
//! Tests of every module run at the same time, on as many threads as there are cores. The
//! heavy ones (every multi-node cluster; rate, memory and descriptor measurements; kill -9
//! under load) hold [`strata_tests::serial`] for their whole run, so no two of them overlap.
//! Nothing here changes process-wide state (no `set_var`, no `set_current_dir`): a broker's
//! settings and environment go to its own command, and its ports come from
//! [`strata_tests::free_port`].

mod acl_client;
mod admin_cli_run;
mod admin_client;
mod cluster_clients;
mod metrics_scrape;
mod rdkafka_clients;

mod acls;
mod admin_apis;
mod admin_cli;
mod backpressure;
mod bad_input;
mod clean_restart;
mod client_quotas;
mod cluster_acls;
mod cluster_admin_cli;
mod cluster_compaction;
mod cluster_controller_writes;
mod cluster_dedicated;
mod cluster_derived_id;
mod cluster_dynamic_quorum;
mod cluster_failover;
mod cluster_faults;
mod cluster_fetch_sessions;
mod cluster_follower_fetch;
mod cluster_forwarding;
mod cluster_groups;
mod cluster_id;
mod cluster_isr;
mod cluster_metrics;
mod cluster_preferred_leader;
mod cluster_producer_ids;
mod cluster_reassignment;
mod cluster_snapshots;
mod cluster_transactions;
mod compaction;
mod console;
mod controller_listener;
mod controller_quorum;
mod env_config;
mod fetch_sessions;
mod file_descriptors;
mod graceful_shutdown;
mod group_commit;
mod healthcheck;
mod idempotence;
mod kcat;
mod kip848_regex;
mod kip848_restart;
mod leader_epochs;
mod legacy_layout;
mod librdkafka_compat_fixes;
mod metrics_endpoint;
mod old_versions;
mod partition_storage_failures;
mod pipelining;
mod rdkafka_admin;
mod rdkafka_delete_records;
mod rdkafka_examples;
mod rdkafka_group_protocols;
mod rdkafka_group_restart;
mod rdkafka_groups;
mod rdkafka_kill9;
mod rdkafka_kip848;
mod rdkafka_offsets;
mod rdkafka_produce_consume;
mod rdkafka_retention;
mod rdkafka_sasl_ssl;
mod roll_recovery_point;
mod storage_experiments;
mod transaction_acls;
mod transactions;
mod transactions_v2;
mod zero_copy_fetch;
