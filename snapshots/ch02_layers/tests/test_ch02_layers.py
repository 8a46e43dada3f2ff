def test_todo(): pass
