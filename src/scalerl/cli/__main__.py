"""`python -m scalerl.cli ...`: the `scalerl` command, for launchers that start a module
(`torchrun --nproc-per-node 2 -m scalerl.cli train ...`)."""

from scalerl.cli.app import main

if __name__ == "__main__":
    main()
