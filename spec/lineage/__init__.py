"""Where a log comes from: seeds, fork boundaries, the closers crash repair appends, and resume."""
