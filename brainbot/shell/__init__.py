"""What the command line gives a shell: completion scripts made from its grammar."""
