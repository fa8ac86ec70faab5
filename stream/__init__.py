"""streameval"""
