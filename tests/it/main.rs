//! oxigram's cross-service suites, one module per topic, in one test binary so the whole
//! system is linked once. Each test starts the services it needs (`oxigram_tests::System`) on
//! its own database; nextest runs every test in its own process.

mod acknowledgements;
mod admin;
mod admin_limits;
mod admission;
mod auth_keys;
mod bad_input;
mod balancing;
mod convergence;
mod dialog_settings;
mod fault_suite;
mod faults;
mod flow;
mod full_stack;
mod group_commit;
mod limits;
mod media;
mod media_messages;
mod message_contents;
mod message_delete;
mod message_edit;
mod message_format;
mod message_forward;
mod metrics;
mod migrate;
mod mtproto;
mod mtproto_oxictl;
mod mtproto_sessions;
mod outbox_recovery;
mod oxictl_files;
mod peers;
mod privacy;
mod private_chat;
mod reactions;
mod schemas;
mod search;
mod smoke;
mod storm;
mod streams;
mod trace;
mod trace_otlp;
mod typing_presence;
mod update_log;
