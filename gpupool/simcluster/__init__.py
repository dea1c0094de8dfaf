"""The simulated cluster's objects in the database, shared by the demo's processes."""
