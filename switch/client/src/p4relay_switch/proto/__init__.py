"""Generated BfRt gRPC stubs (switch/client/gen_proto.sh); do not edit."""
