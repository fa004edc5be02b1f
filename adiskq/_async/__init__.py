"""The async layer (AnyIO): producer, consumers, groups and wake-ups."""
