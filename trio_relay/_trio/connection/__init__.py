"""connection"""
