//! The integration suite: every test spawns the real `convo` binary and talks to it over
//! pipes, in both framings where the behaviour is framing-independent.

mod harness;

mod bounds;
mod cli;
mod config;
mod context;
mod dict;
mod durable;
mod export;
mod failover;
mod faults;
mod fleet;
mod history;
mod interactions;
mod lifecycle;
mod lua;
mod messages;
mod once;
mod postgres;
mod properties;
mod reasoning;
mod replay;
mod runtime;
mod search;
mod sessions;
mod watch;
mod wire;
