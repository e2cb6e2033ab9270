//! Regenerates `include/pool.h` from `src/capi/` with cbindgen when building for the host
//! with the `capi` feature. The header is committed; `make check-header` fails when it is stale.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/capi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rustc-check-cfg=cfg(loom)");
    if env::var_os("CARGO_FEATURE_CAPI").is_none() {
        return;
    }
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    // POOL_HEADER_OUT lets `make check-header` generate into a temporary file to compare.
    let out = env::var_os("POOL_HEADER_OUT").map_or_else(|| dir.join("include/pool.h"), PathBuf::from);
    println!("cargo:rerun-if-env-changed=POOL_HEADER_OUT");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml is valid");
    match cbindgen::Builder::new().with_crate(&dir).with_config(config).generate() {
        Ok(bindings) => {
            bindings.write_to_file(out);
        }
        Err(e) => panic!("cbindgen failed: {e}"),
    }
}
