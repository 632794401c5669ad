//! Helpers shared by the integration tests. Each test binary compiles this module on its own
//! and uses only part of it.
#![allow(dead_code)]

pub mod golden;
