//! Redisson's synchronizers (SYNCHRONIZERS.md): handles that wait through
//! the engine's one waiting loop (`Engine::wait_on`), each in its own file.

mod latch;

pub use latch::CountDownLatch;
