# p4relay — the commands a newcomer needs. See README.md.
SHELL := /bin/bash
.PHONY: setup test lint demo bench compose-test clean help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

setup:  ## install Debian packages, Python (uv), web (npm) and Rust deps; idempotent
	@scripts/setup.sh

test: setup  ## lint, then every suite (Rust, Python, PTF, server, e2e, web); one summary line
	@scripts/run-stages.sh test $(STAGE)

lint:  ## ruff, mypy, rustfmt, clippy, eslint, tsc, offline dependency audit
	@scripts/lint.sh

demo: setup  ## the main job: testbed + three switches (iRED, INT, reroute) + RTPProxy/rtpagent + OpenSIPS + server + console, live SIPp calls, a congestion episode (options: ARGS="--ipv6 --plain --sip kamailio ...")
	@scripts/demo.sh $(ARGS)

bench: setup  ## every benchmark; prints their tables
	@scripts/run-stages.sh bench $(STAGE)

compose-test:  ## build every container image, run the compose stack with SIPp calls and failure drills, tear down (root; ~1 h cold; ENGINE=docker: dockerd + docker compose)
	@scripts/compose-check.sh

clean:  ## remove build output (keeps caches of uv, npm, cargo)
	rm -rf build webui/dist switch/target
