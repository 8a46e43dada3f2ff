print("占位")
