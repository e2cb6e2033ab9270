# mk/embed.mk: install, pkg-config, and the embedding tests (issue 7). Included from the
# Makefile (`include mk/embed.mk`); uses its CARGO, CC, BUILD, LIB, HEADER, CWARN, LDLIBS.
#
#   make install PREFIX=/opt/pool [DESTDIR=/stage]   header, libpool.a, pool.pc
#   make test-install         install into a temporary prefix, build programs with pkg-config
#   make test-zig             the Zig host (examples/zig): parallel quicksort of 10M ints
#   make test-nostd-example   the no_std example crate: host test + thumbv7em footprint build
#   make test-host-platform   the C host-platform test (c_tests/host_platform.c)
#   make footprint            print the footprint figures (FOOTPRINT.md)

# Defaults so `make -f mk/embed.mk install` also works on its own (test-install uses that).
LIB          ?= target/release/libpool.a
HEADER       ?= include/pool.h
BUILD        ?= build

PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR      ?=
INSTALL      ?= install
POOL_VERSION ?= $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
NOSTD_EXAMPLE_DIR := target/nostd-example

.PHONY: install uninstall test-install test-zig test-nostd-example test-host-platform footprint

install: $(LIB) $(HEADER)
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 644 $(HEADER) $(DESTDIR)$(INCLUDEDIR)/pool.h
	$(INSTALL) -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libpool.a
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(POOL_VERSION)|g' \
	    mk/pool.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/pool.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/pool.pc

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/pool.h $(DESTDIR)$(LIBDIR)/libpool.a $(DESTDIR)$(PKGCONFIGDIR)/pool.pc

test-install: $(LIB) $(HEADER)
	CC="$(CC)" CXX="$(CXX)" INSTALL_MAKE="$(MAKE) -f mk/embed.mk" sh scripts/test-install.sh

test-zig: $(LIB) $(HEADER)
	sh examples/zig/run.sh $(LIB) $(BUILD)/zig

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
