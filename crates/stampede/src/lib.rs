pub use stampede_core::*;
