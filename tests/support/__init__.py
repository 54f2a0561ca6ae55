"""What the tests share: the CLI runner, run helpers, crash tools, and the independent
re-implementation of the reference's rules the tests check batchbench against."""
