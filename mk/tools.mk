# mk/tools.mk: `make tools` installs what `make test` needs (scripts/tools.sh says what and
# from where) or fails naming the missing piece. `tool-NAME` installs one; each suite that needs
# a tool depends on its step, so `make test-miri` alone on a fresh machine works too.
TOOLS := targets nightly miri fuzz valgrind lsan zig cmake pkg-config samba-deps
.PHONY: tools $(addprefix tool-,$(TOOLS))
tools:
	@CC="$(CC)" sh scripts/tools.sh all
$(addprefix tool-,$(TOOLS)):
	@CC="$(CC)" sh scripts/tools.sh $(patsubst tool-%,%,$@)
