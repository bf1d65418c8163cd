# Test an ImageNet-1k EVT-L on ImageNet-A (200 of the 1000 classes): the model's 1000 scores
# are restricted to the 200 classes before top-k (SubsetAccuracy). ImageNet-A's class
# folders are WordNet ids, located among the sorted ImageNet-1k train folders.
#   tools/test.py configs/cls/evt/evt-l_8xb128_in1k_test-imagenet-a.py CKPT
# For another arch, change model.backbone.arch / model.neck.in_channels (or --cfg-options).
_base_ = './evt-l_8xb128_in1k.py'

subset_root = 'data/imagenet-a'
test_dataloader = dict(
    dataset=dict(_scope_='mmpretrain',
                 _delete_=True, type='CustomDataset', data_root=subset_root, data_prefix='',
                 pipeline={{_base_.test_pipeline}}))
test_evaluator = dict(_scope_='mmpretrain',
                      _delete_=True, type='SubsetAccuracy', subset_wnids=subset_root,
                      imagenet_wnids='data/imagenet/train', topk=(1, 5))
