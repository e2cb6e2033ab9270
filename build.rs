//! With the `capi` feature, generates the C header from `src/capi/` with cbindgen into
//! `$OUT_DIR/pool.h`; nothing is written into the source tree. `make header` copies it to the
//! committed `include/pool.h` and `make check-header` fails when the two differ. Without
//! `capi` (a Rust user's `default-features = false` or default build) cbindgen is not even a
//! dependency.

fn main() {
    println!("cargo:rerun-if-changed=src/capi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rustc-check-cfg=cfg(loom)");
    #[cfg(feature = "capi")]
    header::generate();
}

#[cfg(feature = "capi")]
mod header {
    use std::env;
    use std::path::PathBuf;

    /// `POOL_VERSION_*` from the package version, after cbindgen.toml's `after_includes`.
    fn version_defines() -> String {
        let v = |k: &str| env::var(k).expect("cargo sets the package version");
        format!(
            "\n/** The version of pool.h (the package version): compare with `pool_version()` at run time. */\n\
             #define POOL_VERSION_MAJOR {}\n\
             /** See POOL_VERSION_MAJOR. */\n#define POOL_VERSION_MINOR {}\n\
             /** See POOL_VERSION_MAJOR. */\n#define POOL_VERSION_PATCH {}\n\
             /** The version as a string, \"MAJOR.MINOR.PATCH\". */\n#define POOL_VERSION_STRING \"{}\"\n",
            v("CARGO_PKG_VERSION_MAJOR"),
            v("CARGO_PKG_VERSION_MINOR"),
            v("CARGO_PKG_VERSION_PATCH"),
            v("CARGO_PKG_VERSION"),
        )
    }

    pub(crate) fn generate() {
        let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("pool.h");
        let mut config =
            cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml is valid");
        let after = config.after_includes.take().unwrap_or_default();
        config.after_includes = Some(after + &version_defines());
        match cbindgen::Builder::new().with_crate(&dir).with_config(config).generate() {
            Ok(bindings) => {
                bindings.write_to_file(out);
            }
            Err(e) => panic!("cbindgen failed: {e}"),
        }
    }
}
