"""The lowest ideas, imported by every layer above: the project's errors, the path guard and
posttrain's home, secret masking, and plain-text helpers. They import nothing of the project
but each other."""
