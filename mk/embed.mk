# mk/embed.mk: install, pkg-config, and the embedding tests (issue 7). Included from the
# Makefile (`include mk/embed.mk`); uses its CARGO, CC, BUILD, LIB, HEADER, CWARN, LDLIBS.
#
#   make install PREFIX=/opt/pool [DESTDIR=/stage]   header, libpool.a, libpool.so, pool.pc, CMake package
#   make test-install         install into a temporary prefix, build programs with pkg-config
#   make test-zig             the Zig host: zig build (build.zig) of examples/zig and of a consumer project
#   make test-nostd-example   the no_std example crate: host test + thumbv7em footprint build
#   make test-host-platform   the C host-platform test (c_tests/host_platform.c)
#   make footprint            print the footprint figures (FOOTPRINT.md)

# Defaults so `make -f mk/embed.mk install` also works on its own (test-install uses that).
LIB          ?= target/release/libpool.a
SOLIB        ?= target/release/libpool.so
HEADER       ?= include/pool.h
BUILD        ?= build

PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/pool
DESTDIR      ?=
INSTALL      ?= install
# The installed libraries carry no debug info (libpool.a shrinks from ~23 MB to ~4 MB); the
# build tree keeps it for profiling. `make install STRIP=:` installs them unstripped.
STRIP        ?= strip --strip-debug
POOL_VERSION ?= $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
POOL_MAJOR   ?= $(word 1,$(subst ., ,$(POOL_VERSION)))
POOL_MINOR   := $(word 2,$(subst ., ,$(POOL_VERSION)))
NOSTD_EXAMPLE_DIR := target/nostd-example
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
            -e 's|@VERSION@|$(POOL_VERSION)|g' -e 's|@MAJOR@|$(POOL_MAJOR)|g' -e 's|@MINOR@|$(POOL_MINOR)|g'

.PHONY: install uninstall test-install test-zig test-nostd-example test-host-platform footprint

# pool.h; libpool.a; libpool.so.X.Y.Z with libpool.so.X (the soname) and libpool.so (for -lpool)
# as links; pool.pc (shared) and pool-static.pc; the CMake package (pool::pool).
install: $(LIB) $(SOLIB) $(HEADER)
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR)
	$(INSTALL) -m 644 $(HEADER) $(DESTDIR)$(INCLUDEDIR)/pool.h
	$(INSTALL) -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libpool.a
	$(STRIP) $(DESTDIR)$(LIBDIR)/libpool.a
	$(INSTALL) -m 755 $(SOLIB) $(DESTDIR)$(LIBDIR)/libpool.so.$(POOL_VERSION)
	$(STRIP) $(DESTDIR)$(LIBDIR)/libpool.so.$(POOL_VERSION)
	ln -sf libpool.so.$(POOL_VERSION) $(DESTDIR)$(LIBDIR)/libpool.so.$(POOL_MAJOR)
	ln -sf libpool.so.$(POOL_MAJOR) $(DESTDIR)$(LIBDIR)/libpool.so
	$(SUBST) mk/pool.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/pool.pc
	$(SUBST) mk/pool-static.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/pool-static.pc
	$(SUBST) mk/cmake/poolConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/poolConfig.cmake
	$(SUBST) mk/cmake/poolConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/poolConfigVersion.cmake
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/pool.pc $(DESTDIR)$(PKGCONFIGDIR)/pool-static.pc \
	  $(DESTDIR)$(CMAKEDIR)/poolConfig.cmake $(DESTDIR)$(CMAKEDIR)/poolConfigVersion.cmake

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/pool.h $(DESTDIR)$(LIBDIR)/libpool.a \
	  $(DESTDIR)$(LIBDIR)/libpool.so.$(POOL_VERSION) $(DESTDIR)$(LIBDIR)/libpool.so.$(POOL_MAJOR) \
	  $(DESTDIR)$(LIBDIR)/libpool.so $(DESTDIR)$(PKGCONFIGDIR)/pool.pc $(DESTDIR)$(PKGCONFIGDIR)/pool-static.pc \
	  $(DESTDIR)$(CMAKEDIR)/poolConfig.cmake $(DESTDIR)$(CMAKEDIR)/poolConfigVersion.cmake

# Installs into a temporary prefix and builds consumers against it: pkg-config (shared and
# static), CMake (pool::pool both ways), the shared library found by rpath and by
# LD_LIBRARY_PATH; checks soname, links, `nm -D` (only pool_*) and that no debug info is left.
test-install: $(LIB) $(SOLIB) $(HEADER) tool-cmake tool-pkg-config
	CC="$(CC)" CXX="$(CXX)" CMAKE="$$(sh scripts/tools.sh cmake-path)" \
	  INSTALL_MAKE="$(MAKE) -f mk/embed.mk" sh scripts/test-install.sh

# `zig build run` of this package (examples/zig/main.zig) and a consumer project depending on
# it by path (README's Zig program). Its own cargo target dir in the Zig cache: the first run
# builds libpool.a there (~1 min on 2 cores), later runs only what changed.
test-zig: $(HEADER) tool-zig
	sh examples/zig/run.sh $(BUILD)/zig

test-host-platform: $(BUILD)/host_platform
	./$(BUILD)/host_platform

# The example crate has its own workspace; its builds go under target/ (one dir, so the
# footprint and baseline builds share compiled dependencies).
test-nostd-example:
	cd examples/nostd && $(CARGO) test --release --target-dir ../../$(NOSTD_EXAMPLE_DIR)
	cd examples/nostd && $(CARGO) build --release --features footprint --bin footprint \
	    --target thumbv7em-none-eabihf --target-dir ../../$(NOSTD_EXAMPLE_DIR)

footprint:
	sh scripts/footprint.sh
