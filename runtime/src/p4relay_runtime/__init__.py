"""What p4relay's Python components share at run time.

* `logs.configure_logging`: structlog set up one way for every daemon (JSON
  lines on stderr, or console text for people).
* `settings`: one configuration mechanism (pydantic-settings; environment
  `P4RELAY_<COMPONENT>_<SETTING>`, a former name read with a warning) and the
  settings table each component's README carries.
* `procs`: start a process, wait until it listens, stop it (SIGTERM, then
  SIGKILL); the software switch binary and a launcher for it. The testbeds and
  the test suites start processes with these.
"""
