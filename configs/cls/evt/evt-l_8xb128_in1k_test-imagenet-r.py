# Test an ImageNet-1k EVT-L on ImageNet-R (200 classes): see the ImageNet-A config.
_base_ = './evt-l_8xb128_in1k_test-imagenet-a.py'

subset_root = 'data/imagenet-r'
test_dataloader = dict(dataset=dict(data_root=subset_root))
test_evaluator = dict(subset_wnids=subset_root)
