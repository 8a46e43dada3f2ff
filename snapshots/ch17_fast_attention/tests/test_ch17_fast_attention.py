def test_placeholder_to_be_replaced(): pass
