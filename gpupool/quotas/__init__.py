"""The queue tree, quotas, priority classes, budgets and quota requests."""
