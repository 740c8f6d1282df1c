"""p4relay's switch control plane: one daemon per switch (`p4relay-controlplane`)
owns every switch feature except the per-call entries and port binding
(rtpagent's): egress shaping, next hops and routes, congestion reroute, INT and
iRED. See switch/controlplane/README.md."""
