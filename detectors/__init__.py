"""Pure detection logic: alert model and one module a detector. No I/O."""
