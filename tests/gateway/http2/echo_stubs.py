"""The Python stubs of echo.proto for grpc_upstream.py and grpc_client.py:
echo_pb2 and echo_pb2_grpc, which the build generates with protoc and
grpc_python_plugin into a directory of the build tree
(tests/gateway/CMakeLists.txt), given to the scripts as --stubs DIR."""

import os
import sys


def load(directory):
    """(echo_pb2, echo_pb2_grpc), from `directory` when given, else from the
    Python path; exits with a message when they cannot be imported."""
    if directory:
        sys.path.insert(0, directory)
    try:
        import echo_pb2
        import echo_pb2_grpc
    except ImportError as e:
        sys.exit("%s: no stubs generated from echo.proto (%s): build the test (it runs "
                 "protoc) and pass --stubs DIR" % (os.path.basename(sys.argv[0]), e))
    return echo_pb2, echo_pb2_grpc
