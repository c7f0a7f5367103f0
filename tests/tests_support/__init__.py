"""Code the CLI tests load with ``foldline run ... --tools tests_support.user_tools:registry``."""
