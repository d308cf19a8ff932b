//! The Spindle guide (`guide/src`, an mdBook), as doctests.
//!
//! Every chapter is included as the documentation of an empty module, so
//! that `cargo test -p spindle-guide` (and `cargo test --workspace`)
//! compiles and runs each of its Rust code blocks against the workspace's
//! crates: the guide cannot drift from the API. A block that cannot run
//! on its own (a server waiting for Ctrl-C) is `no_run` and still
//! compiled; a block marked `ignore` needs an API named on its
//! `// needs:` line.
//!
//! This crate has no items outside `cfg(doctest)`; it is not published.

#[cfg(doctest)]
macro_rules! chapters {
    ($($module:ident = $file:literal),* $(,)?) => {
        $(
            #[doc = include_str!(concat!("../src/", $file))]
            mod $module {}
        )*
    };
}

#[cfg(doctest)]
chapters! {
    introduction = "introduction.md",
    tutorial = "tutorial.md",
    mini_redis = "mini-redis.md",
    io_blocks = "io-blocks.md",
    streams = "streams.md",
    operating_system = "operating-system.md",
    coming_from_tokio = "coming-from-tokio.md",
    coming_from_cats_effect = "coming-from-cats-effect.md",
    which_executor = "which-executor.md",
    cancellation = "cancellation.md",
    tracing = "tracing.md",
    observability = "observability.md",
    simulation = "simulation.md",
}
